"""The benchmark interface used inside task sandboxes.

A benchmark is: a loader (``load``), a prompt builder (``build_messages``; rendering
to text per model family is in posttrainbench.task.evaluation.chat_format), generation
settings, and a scorer (``score`` / ``score_batch``). Stdlib only, so
host tests without torch can import every scorer.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


@dataclass(frozen=True)
class ContaminationText:
    """What a contaminated training file would contain of one test item (the
    contamination judge's reference)."""

    question: str
    answer: str | None = None
    passage: str | None = None


def messages_text(messages: object, role: str = "user") -> str:
    """The text of a chat's messages of one role (nested turn lists are flattened)."""
    if isinstance(messages, str):
        return messages
    out: list[str] = []
    for turn in messages if isinstance(messages, list) else []:
        for message in turn if isinstance(turn, list) else [turn]:
            if isinstance(message, dict) and message.get("role") == role and message.get("content"):
                out.append(str(message["content"]))
    return "\n".join(out)


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings; temperature 0 means greedy.

    ``num_seeds`` > 1 (only meaningful with sampling) makes the final evaluation run
    that many seeds and report their mean and standard error. ``stop`` strings end a
    completion (the stop string itself is cut off).
    """

    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    num_seeds: int = 1
    stop: tuple[str, ...] = ()
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    repetition_penalty: float = 1.0


@dataclass(frozen=True)
class Sample:
    """One test item. ``data`` holds the benchmark-specific fields."""

    id: str
    category: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoreResult:
    """Outcome of scoring one completion. ``score`` is in [0, 1].

    ``findings`` name what the scorer caught the completion doing to game it (e.g.
    ``judge_injection:verdict_label``, ``hedged_answer``); they reach ``metrics.json``.
    """

    score: float
    error_type: str | None = None
    detail: str = ""
    findings: tuple[str, ...] = ()

    @property
    def correct(self) -> bool:
        return self.score >= 1.0


class Benchmark(ABC):
    """Base class for sandbox benchmarks; subclasses are small and mostly data."""

    id: str
    name: str
    generation: GenerationSettings = GenerationSettings()

    # True when scoring calls an LLM judge/grader (needs litellm and an API key).
    uses_llm_judge: bool = False

    def aggregate_scores(self, results: Sequence[ScoreResult]) -> dict[str, float] | None:
        """``accuracy`` and ``stderr`` of one seed's *results* when the benchmark's reference
        harness does not take the mean of the question scores (Arena-Hard pools its
        weighted games); None (the default): the runner's mean and stderr."""
        return None

    def load(self, split: str = "test", limit: int | None = None) -> list[Sample]:
        """The first *limit* samples of *split* (None = all) from the prepared data dir."""
        from .datafiles import read_split

        samples = read_split(self.id, split)
        return samples if limit is None else samples[:limit]

    @abstractmethod
    def build_messages(self, sample: Sample) -> list[Message]:
        """Chat messages for *sample* (without the answer)."""

    @abstractmethod
    def score(self, sample: Sample, completion: str) -> ScoreResult:
        """Score one model completion for *sample*."""

    @abstractmethod
    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The text of a prepared test item (``Sample.data``) that a contaminated
        training file would contain."""

    def tools(self, sample: Sample) -> list[dict[str, Any]] | None:
        """The OpenAI-style tool list the chat template renders for *sample* (``tools=``).

        None (the default) renders no tools; a function-calling benchmark returns the
        ``{"type": "function", "function": {...}}`` dicts an OpenAI server hands its
        chat template.
        """
        return None

    def judge(self) -> Any:
        """The LLM judge client of a judged benchmark (None otherwise).

        Judged benchmarks override this; it raises ``JudgeConfigError`` when the judge
        cannot be used (no key, no litellm), so callers check it before generating.
        """
        return None

    def score_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[ScoreResult]:
        """Score many completions; benchmarks override this to parallelise (judges, execution)."""
        return [self.score(s, c) for s, c in zip(samples, completions)]

    def cannot_succeed(self, completion_prefix: str) -> bool:
        """True if no continuation of this partial completion can score > 0.

        Backends may stop generating a sequence once this holds (a pure speed-up: the
        verdict cannot change). The default never stops early.
        """
        return False

    def data_sha256(self, samples: Sequence[Sample]) -> str:
        """Hash of the evaluated items, so two runs can show they used the same questions."""
        h = hashlib.sha256()
        for s in samples:
            h.update(json.dumps({"id": s.id, "data": s.data}, sort_keys=True).encode())
        return h.hexdigest()
