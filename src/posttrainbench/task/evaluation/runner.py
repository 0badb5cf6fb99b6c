"""Evaluate one model directory on one benchmark -> :class:`Metrics`.

Hardening for the final evaluation: sampled benchmarks run several seeds (mean and
standard error across seeds); a generation that fails, runs out of memory or passes its
time limit is retried with half the max tokens, and every attempt is logged (stderr and
``Metrics.attempts``). The time limits come from the work and the throughput measured on
each attempt's first batch, within the verifier's deadline (:mod:`.time_budget`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from posttrainbench.core.weights import WEIGHT_SUFFIXES

from ..benchmarks import Benchmark, Sample
from ..benchmarks.base import GenerationSettings, ScoreResult
from ..schemas import GenerationAttempt, Metrics, ScorerFinding
from .backends import DEFAULT_BATCH_SIZE, ModelLoadError
from .progress import NoProgress, Progress
from .time_budget import Deadline, Throughput, Work, first_batch_limit, first_batch_size, rest_limit

MIN_RETRY_TOKENS = 64


class AttemptTimeout(Exception):
    """One generation attempt ran past its time limit."""


class GenerationFailed(RuntimeError):
    """Every generation attempt failed; ``attempts`` says how."""

    def __init__(self, message: str, attempts: list[GenerationAttempt]):
        super().__init__(message)
        self.attempts = attempts


def model_fingerprint(model_path: str | Path, full_hash_limit_bytes: int = 1 << 30) -> str:
    """sha256 over config + weight files: full content when small, else names and sizes."""
    root = Path(model_path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    weights = [p for p in files if p.suffix in WEIGHT_SUFFIXES]
    full = sum(p.stat().st_size for p in weights) <= full_hash_limit_bytes
    h = hashlib.sha256()
    for p in files:
        rel = p.relative_to(root).as_posix()
        if p.name == "config.json" or (full and p in weights):
            h.update(rel.encode())
            with p.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        elif p in weights:
            h.update(f"{rel}:{p.stat().st_size}".encode())
    return h.hexdigest()


def stderr_of(accuracy: float, n: int) -> float:
    """Binomial standard error of a mean score over *n* items."""
    return math.sqrt(accuracy * (1 - accuracy) / (n - 1)) if n > 1 else 0.0


def seeds_for(
    settings: GenerationSettings, base_seed: int, num_seeds: int | None = None
) -> list[int]:
    """Seeds to run: one for greedy decoding, ``num_seeds`` consecutive ones when sampling."""
    k = num_seeds if num_seeds is not None else settings.num_seeds
    return [base_seed] if settings.temperature <= 0 else [base_seed + i for i in range(max(1, k))]


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise AttemptTimeout in the main thread after *seconds* (no limit elsewhere)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum, frame):
        raise AttemptTimeout(f"attempt exceeded {seconds:.0f}s")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def generate_with_retries(
    backend,
    prompts: Sequence[str],
    settings: GenerationSettings,
    seed: int,
    stop_fn,
    deadline: Deadline | None,
    max_attempts: int = 3,
    log=None,
    progress: Progress | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    ladder: Sequence[int] | None = None,
) -> tuple[list[str], list[GenerationAttempt]]:
    """Generate, retrying with fewer max tokens after a failure, OOM or timeout.

    *ladder*: the token caps to try, in order, one attempt each (PostTrainBench's
    cascade); without one, *settings*' cap, then half of it, *max_attempts* times. With
    a *deadline*, each attempt runs under the limits of :mod:`.time_budget`; without one
    (agent-side evaluations), under none.
    """
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    progress = progress or NoProgress()
    attempts: list[GenerationAttempt] = []
    caps = list(ladder) if ladder else None
    if caps:
        max_attempts = len(caps)
    tokens = caps[0] if caps else settings.max_new_tokens
    for number in range(1, max_attempts + 1):
        current = dataclasses.replace(settings, max_new_tokens=tokens)
        last = number == max_attempts or (not caps and tokens <= MIN_RETRY_TOKENS)
        progress.start_attempt(len(prompts), number, tokens)
        t0 = time.perf_counter()
        limits: list[float] = []
        try:
            outputs = _attempt(
                backend,
                prompts,
                current,
                seed,
                stop_fn,
                deadline,
                last,
                progress,
                batch_size,
                limits,
            )
        except ModelLoadError:
            raise  # fewer tokens cannot help a model that does not load
        except (AttemptTimeout, MemoryError, RuntimeError) as exc:
            kind = "out of memory" if _is_oom(exc) else type(exc).__name__
            attempts.append(
                GenerationAttempt(
                    seed=seed,
                    max_new_tokens=tokens,
                    ok=False,
                    seconds=round(time.perf_counter() - t0, 2),
                    error=f"{kind}: {exc}"[:500],
                    time_limit_s=_last_limit(limits),
                )
            )
            log(
                f"[eval] attempt {number} seed={seed} max_new_tokens={tokens} failed: {kind}: {str(exc)[:200]}"
            )
            _free_accelerator_memory()
            if last:
                break
            tokens = caps[number] if caps else max(MIN_RETRY_TOKENS, tokens // 2)
            continue
        attempts.append(
            GenerationAttempt(
                seed=seed,
                max_new_tokens=tokens,
                ok=True,
                seconds=round(time.perf_counter() - t0, 2),
                time_limit_s=_last_limit(limits),
            )
        )
        log(
            f"[eval] attempt {number} seed={seed} max_new_tokens={tokens} ok in {attempts[-1].seconds:.1f}s"
        )
        return outputs, attempts
    raise GenerationFailed(
        f"generation failed after {len(attempts)} attempts: {attempts[-1].error}", attempts
    )


def _last_limit(limits: list[float]) -> float | None:
    return round(limits[-1], 1) if limits else None


def _attempt(
    backend,
    prompts: Sequence[str],
    settings: GenerationSettings,
    seed: int,
    stop_fn,
    deadline: Deadline | None,
    last: bool,
    progress: Progress,
    batch_size: int,
    limits: list[float],
) -> list[str]:
    """One attempt: the first batch (measuring throughput), then the rest under a limit scaled from it.

    Appends each limit used to *limits*, so a failed attempt still records its limit.
    """
    if deadline is None:
        return _generate(backend, prompts, settings, seed, stop_fn, progress)
    k = first_batch_size(len(prompts), batch_size)
    limits.append(first_batch_limit(deadline, last))
    t0 = time.perf_counter()
    with time_limit(limits[-1]):
        outputs = _generate(backend, prompts[:k], settings, seed, stop_fn, progress)
    if k == len(prompts):
        return outputs
    throughput = Throughput.measure(Work(k, settings.max_new_tokens), time.perf_counter() - t0)
    limits.append(
        rest_limit(Work(len(prompts) - k, settings.max_new_tokens), throughput, deadline, last)
    )
    with time_limit(limits[-1]):
        return outputs + _generate(backend, prompts[k:], settings, seed, stop_fn, progress)


def _generate(
    backend,
    prompts: Sequence[str],
    settings: GenerationSettings,
    seed: int,
    stop_fn,
    progress: Progress,
) -> list[str]:
    """backend.generate, with live progress where the backend reports it, else once at the end."""
    if "progress" in inspect.signature(backend.generate).parameters:
        return backend.generate(prompts, settings, seed, stop_fn=stop_fn, progress=progress.advance)
    outputs = backend.generate(prompts, settings, seed, stop_fn=stop_fn)
    progress.advance(len(prompts))
    return outputs


def _free_accelerator_memory() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def aggregate(
    samples: Sequence[Sample],
    per_seed: list[list[ScoreResult]],
    benchmark: Benchmark | None = None,
) -> dict:
    """Accuracy, stderr, correct count and per-category means over one or more seeds.

    A *benchmark* whose reference harness aggregates otherwise (Arena-Hard pools its
    games) gives each seed's accuracy and, for one seed, the stderr
    (:meth:`Benchmark.aggregate_scores`).
    """
    n = len(samples)
    own = [benchmark.aggregate_scores(scores) if benchmark else None for scores in per_seed]
    accs = [
        o["accuracy"] if o is not None else _mean([r.score for r in scores])
        for o, scores in zip(own, per_seed)
    ]
    acc = _mean(accs)
    if len(accs) > 1:
        var = sum((a - acc) ** 2 for a in accs) / (len(accs) - 1)
        stderr = math.sqrt(var / len(accs))
    elif own and own[0] is not None:
        stderr = own[0]["stderr"]
    else:
        stderr = stderr_of(acc, n)
    by_cat: dict[str, list[float]] = defaultdict(list)
    for scores in per_seed:
        for s, r in zip(samples, scores):
            by_cat[s.category].append(r.score)
    correct = _mean([sum(1 for r in scores if r.correct) for scores in per_seed])
    return {
        "accuracy": min(1.0, max(0.0, acc)),
        "stderr": stderr,
        "n_correct": int(round(correct)),
        "per_category": {k: _mean(v) for k, v in sorted(by_cat.items())},
        "per_seed_accuracy": accs,
    }


def evaluate_model(
    benchmark: Benchmark,
    samples: Sequence[Sample],
    model_path: str,
    backend_name: str | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    early_stop: bool = True,
    completions_out: list | None = None,
    num_seeds: int | None = None,
    deadline: Deadline | None = None,
    split: str = "test",
    progress: Progress | None = None,
    max_new_tokens: int | None = None,
    model_name: str | None = None,
    templates_dir: Path | None = None,
    token_ladder: Sequence[int] | None = None,
    model_sampling: bool = False,
) -> Metrics:
    """Generate and score every sample (for each seed). Raises ModelLoadError or GenerationFailed.

    The chat template is PostTrainBench's for the family that *model_name* (default: the
    path) names (:mod:`.chat_format`), from *templates_dir* (default: the sealed copy);
    an undeterminable family raises :class:`~.chat_format.TemplateFamilyError` before any
    model is loaded. *token_ladder*: the caps tried in order after failures (the
    ``posttrainbench`` variant's); it replaces *max_new_tokens*. *model_sampling*: decode
    as PostTrainBench's vLLM server does, with the model's own generation config
    (:mod:`.sampling`) instead of the benchmark's settings.

    *deadline*: when all generation must have ended (the verifier's); attempts then run
    under the limits of :mod:`.time_budget`. *progress*: where questions done are reported.
    *max_new_tokens*: replaces the benchmark's cap (``ptb eval --max-new-tokens``).
    """
    from ..benchmarks.plugin import plugins
    from .backends import make_backend
    from .chat_format import TEMPLATE_DIR, forced_template, read_model_config, render_chat
    from .sampling import posttrainbench_sampling, token_cap

    plugin = plugins().get(benchmark.id)
    template = forced_template(
        model_name or str(model_path),
        read_model_config(model_path),
        templates_dir or TEMPLATE_DIR,
        plugin.template_overrides if plugin else None,
    )
    # A judged benchmark's judge must be usable before any generation time is spent.
    judge = benchmark.judge() if benchmark.uses_llm_judge else None
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    batch_size = batch_size or DEFAULT_BATCH_SIZE
    backend = make_backend(model_path, backend_name, batch_size=batch_size)
    timings["load_s"] = round(time.perf_counter() - t0, 2)
    tokenizer = getattr(backend, "tokenizer", None)
    prompts = [
        render_chat(benchmark.build_messages(s), template, tokenizer, benchmark.tools(s))
        for s in samples
    ]
    settings = benchmark.generation
    if max_new_tokens is not None:
        settings = dataclasses.replace(settings, max_new_tokens=max_new_tokens)
    if model_sampling:
        settings = posttrainbench_sampling(settings, model_path)
        cap = token_cap(model_path)
        if cap is not None:  # vLLM caps every request at the model's max_new_tokens
            settings = dataclasses.replace(
                settings, max_new_tokens=min(settings.max_new_tokens, cap)
            )
            if token_ladder:
                token_ladder = list(dict.fromkeys(min(c, cap) for c in token_ladder))
    # Only a benchmark that can tell a hopeless prefix gets checked per step (and only
    # then is it sent to CPU worker processes).
    overrides = type(benchmark).cannot_succeed is not Benchmark.cannot_succeed
    stop_fn = benchmark.cannot_succeed if early_stop and overrides else None
    seeds = seeds_for(settings, seed, num_seeds)
    per_seed: list[list[ScoreResult]] = []
    findings: list[ScorerFinding] = []
    attempts: list[GenerationAttempt] = []
    gen_s = score_s = 0.0
    for s_seed in seeds:
        t1 = time.perf_counter()
        completions, tries = generate_with_retries(
            backend,
            prompts,
            settings,
            s_seed,
            stop_fn,
            deadline,
            progress=progress,
            batch_size=batch_size,
            ladder=token_ladder,
        )
        attempts.extend(tries)
        t2 = time.perf_counter()
        scores = benchmark.score_batch(samples, completions)
        gen_s += t2 - t1
        score_s += time.perf_counter() - t2
        per_seed.append(scores)
        findings.extend(
            ScorerFinding(item_id=s.id, seed=s_seed, kind=kind)
            for s, r in zip(samples, scores)
            for kind in r.findings
        )
        if completions_out is not None:
            completions_out.extend(
                {
                    "id": s.id,
                    "seed": s_seed,
                    "completion": c,
                    "score": r.score,
                    "error_type": r.error_type,
                    "detail": r.detail,
                    "findings": list(r.findings),
                }
                for s, c, r in zip(samples, completions, scores)
            )
    timings.update(
        generate_s=round(gen_s, 2),
        score_s=round(score_s, 2),
        total_s=round(time.perf_counter() - t0, 2),
    )
    return Metrics(
        benchmark=benchmark.id,
        model_path=str(model_path),
        split=split,
        n=len(samples),
        seeds=seeds,
        backend=backend.name,
        max_new_tokens=min(a.max_new_tokens for a in attempts if a.ok),
        temperature=settings.temperature,
        judge_model=getattr(judge, "model", None),
        data_sha256=benchmark.data_sha256(samples),
        model_sha256=model_fingerprint(model_path),
        seed=seed,
        timings=timings,
        attempts=attempts,
        scorer_findings=findings,
        **aggregate(samples, per_seed, benchmark),
    )
