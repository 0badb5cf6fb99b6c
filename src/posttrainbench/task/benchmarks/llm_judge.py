"""LLM judges and graders for the judged benchmarks (Arena-Hard writing, HealthBench).

A judge is anything with ``complete(messages, *, temperature, max_tokens) -> str``.
:func:`make_judge` picks one from the environment:

- ``PTB_JUDGE_RECORDINGS=FILE``: :class:`RecordedJudge` replays recorded responses
  (tests, offline re-scoring); a request with no recording is an error.
- otherwise :class:`LitellmJudge` calls ``litellm.completion`` for ``PTB_JUDGE_MODEL``
  (or the benchmark's default). Missing credentials fail once, before any call.
- ``PTB_JUDGE_RECORD_TO=FILE`` additionally writes every live response to FILE, in the
  format ``PTB_JUDGE_RECORDINGS`` reads.

Requests run in parallel (:func:`parallel_map`, ``PTB_JUDGE_CONCURRENCY`` threads).

``temperature=None`` leaves the temperature to the provider's default, and a
``reasoning_effort`` keyword (optional; judges that take no such keyword are only ever
called without it) asks a reasoning model for that effort; a model that rejects the
parameter is asked again without it, as PostTrainBench's Arena-Hard judge does.

Stdlib only at import time; litellm is imported lazily (``requirements-judge.txt``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from posttrainbench.core.atomic_write import write_text_atomic

from .base import Message

MODEL_ENV = "PTB_JUDGE_MODEL"
RECORDINGS_ENV = "PTB_JUDGE_RECORDINGS"
RECORD_TO_ENV = "PTB_JUDGE_RECORD_TO"
CONCURRENCY_ENV = "PTB_JUDGE_CONCURRENCY"
DEFAULT_CONCURRENCY = 16
RECORDING_FORMAT = "posttrainbench-judge-recording/1"

# litellm exception names worth retrying: rate limits, timeouts, server-side failures.
_TRANSIENT = (
    "RateLimitError",
    "APIConnectionError",
    "Timeout",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
)

T = TypeVar("T")
R = TypeVar("R")


class JudgeConfigError(RuntimeError):
    """The judge cannot be used as configured (no credentials, no litellm, bad file)."""


class MissingRecordingError(KeyError):
    """A :class:`RecordedJudge` was asked for a request it has no recording of."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class JudgeClient(Protocol):
    """A chat-completion endpoint used as judge or grader."""

    model: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float | None,
        max_tokens: int,
        reasoning_effort: str | None = None,
    ) -> str:
        """The judge's reply text to *messages* (``temperature=None``: the provider's default;
        *reasoning_effort*: a reasoning model's effort, None: not sent)."""
        ...


def recording_key(model: str, messages: Sequence[Message]) -> str:
    """sha256 identifying one judge request: the model name and the exact messages."""
    payload = json.dumps(
        {"model": model, "messages": [dict(m) for m in messages]},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def judge_concurrency() -> int:
    """Parallel judge requests: ``$PTB_JUDGE_CONCURRENCY`` (default 16, at least 1)."""
    raw = os.environ.get(CONCURRENCY_ENV, "")
    try:
        return max(1, int(raw)) if raw.strip() else DEFAULT_CONCURRENCY
    except ValueError:
        raise JudgeConfigError(f"{CONCURRENCY_ENV} must be an integer, got {raw!r}") from None


class LitellmJudge:
    """A live judge through ``litellm.completion``, retrying transient errors."""

    def __init__(
        self,
        model: str,
        max_attempts: int = 6,
        backoff_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.model = model
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self._sleep = sleep
        self._litellm = _import_litellm()
        # Check credentials now, so a missing key is one clear error before any request.
        env = self._litellm.validate_environment(model)
        missing = list(env.get("missing_keys") or [])
        if not env.get("keys_in_environment", True) or missing:
            keys = " and ".join(missing) or "credentials"
            raise JudgeConfigError(
                f"judge model {model} needs {keys} (set it, or {MODEL_ENV} to another litellm model)"
            )

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float | None,
        max_tokens: int,
        reasoning_effort: str | None = None,
    ) -> str:
        """One completion; transient failures are retried with exponential backoff.

        ``temperature=None`` sends no temperature. A *reasoning_effort* the model rejects
        (an error that names reasoning) is dropped and the request sent again.
        """
        transient = tuple(
            getattr(self._litellm, n) for n in _TRANSIENT if hasattr(self._litellm, n)
        )
        extra: dict[str, Any] = {}
        if reasoning_effort is not None:
            extra["reasoning_effort"] = reasoning_effort
        bad_request = getattr(self._litellm, "BadRequestError", None)
        attempt = 0
        while attempt < self.max_attempts:
            attempt += 1
            try:
                resp = self._litellm.completion(
                    model=self.model,
                    messages=list(messages),
                    temperature=temperature,
                    max_tokens=max_tokens,
                    **extra,
                )
                return resp.choices[0].message.content or ""
            except transient:
                if attempt == self.max_attempts:
                    raise
                self._sleep(self.backoff_s * 2 ** (attempt - 1))
            except Exception as exc:
                rejected = isinstance(bad_request, type) and isinstance(exc, bad_request)
                if not (extra and rejected and "reasoning" in str(exc).lower()):
                    raise
                extra = {}  # the model takes no reasoning_effort: ask again without it
                attempt -= 1
        raise AssertionError("unreachable")


def _import_litellm() -> Any:
    # litellm fetches a remote price table at import unless told not to; judges run in
    # places without general network access, and the bundled table is enough.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise JudgeConfigError(
            "LLM-judged benchmarks need litellm "
            "(pinned in posttrainbench/task/evaluation/requirements-judge.txt)"
        ) from None
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on errors
    return litellm


class RecordedJudge:
    """Replays responses recorded for (model, messages); never calls a live API.

    File format: ``{"format": ..., "recordings": [{"key", "model", "response", "note"?}]}``
    where ``key`` is :func:`recording_key` of the request. Several entries with one key
    (a request that was retried) are replayed in order, the last one repeating.
    """

    def __init__(self, path: Path, model: str):
        self.path = Path(path)
        self.model = model
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            entries = [(r["key"], r["response"]) for r in doc.get("recordings", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise JudgeConfigError(f"cannot read judge recordings {self.path}: {exc!r}") from None
        self._responses: dict[str, list[str]] = {}
        for key, response in entries:
            self._responses.setdefault(key, []).append(response)
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float | None,
        max_tokens: int,
        reasoning_effort: str | None = None,
    ) -> str:
        key = recording_key(self.model, messages)
        replies = self._responses.get(key)
        if not replies:
            preview = (messages[-1]["content"] if messages else "")[:120].replace("\n", " ")
            raise MissingRecordingError(
                f"no recorded judge response in {self.path} for model {self.model} "
                f"(key {key[:16]}..., last message {preview!r})"
            )
        with self._lock:
            n = self._served.get(key, 0)
            self._served[key] = n + 1
        return replies[min(n, len(replies) - 1)]


class RecordingJudge:
    """Wraps a live judge and appends each response to a recording file (thread-safe)."""

    def __init__(self, inner: JudgeClient, path: Path):
        self.inner = inner
        self.model = inner.model
        self.path = Path(path)
        self._lock = threading.Lock()
        self._recordings: list[dict[str, str]] = []
        if self.path.is_file():  # extend an existing recording rather than clobber it
            self._recordings = json.loads(self.path.read_text(encoding="utf-8")).get(
                "recordings", []
            )

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float | None,
        max_tokens: int,
        reasoning_effort: str | None = None,
    ) -> str:
        extra = {} if reasoning_effort is None else {"reasoning_effort": reasoning_effort}
        response = self.inner.complete(
            messages, temperature=temperature, max_tokens=max_tokens, **extra
        )
        entry = {
            "key": recording_key(self.model, messages),
            "model": self.model,
            "note": (messages[-1]["content"] if messages else "")[:200],
            "response": response,
        }
        with self._lock:
            self._recordings.append(entry)
            doc = {"format": RECORDING_FORMAT, "recordings": self._recordings}
            write_text_atomic(self.path, json.dumps(doc, indent=1, ensure_ascii=False))
        return response


def judge_model(default_model: str) -> str:
    """The judge model: ``$PTB_JUDGE_MODEL`` or the benchmark's *default_model*."""
    return os.environ.get(MODEL_ENV, "").strip() or default_model


def make_judge(default_model: str) -> JudgeClient:
    """The judge selected by the environment (see the module docstring)."""
    model = judge_model(default_model)
    recordings = os.environ.get(RECORDINGS_ENV, "").strip()
    if recordings:
        return RecordedJudge(Path(recordings), model)
    judge: JudgeClient = LitellmJudge(model)
    record_to = os.environ.get(RECORD_TO_ENV, "").strip()
    if record_to:
        judge = RecordingJudge(judge, Path(record_to))
    return judge


def strip_thinking(completion: str) -> str:
    """The answer part of a completion, as the judges see it.

    ``<think>...</think>`` blocks are removed (as the reference harness does); an
    unterminated ``<think>`` means the model never got to its answer, so it and
    everything after it is dropped.
    """
    text = re.sub(r"<think>.*?</think>\s*", "", completion, flags=re.DOTALL)
    start = text.find("<think>")
    if start != -1:
        text = text[:start]
    return text.strip()


def parallel_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R | BaseException]:
    """``fn`` over *items* on ``judge_concurrency()`` threads, in order.

    An item whose call raised yields the exception instead of a result, so one failed
    judge request does not lose the others; callers decide what a failure means.
    """

    def guarded(item: T) -> R | BaseException:
        try:
            return fn(item)
        except Exception as exc:  # reported per item by the caller
            return exc

    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(judge_concurrency(), len(items))) as pool:
        return list(pool.map(guarded, items))


def raise_systemic(outcomes: Sequence[object]) -> None:
    """Re-raise failures that are not about one answer: any configuration error (a
    missing recording included), or the first failure when every request failed (bad
    key, no network). Other failures stay per-item and are reported in the scores."""
    for o in outcomes:
        if isinstance(o, (JudgeConfigError, MissingRecordingError)):
            raise o
    if outcomes and all(isinstance(o, BaseException) for o in outcomes):
        raise outcomes[0]  # type: ignore[misc]
