"""`judgement_<id>.json`: what one judge decided about one run, and why."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrainbench.core.atomic_write import write_text_atomic

JudgeId = Literal[
    "contamination", "disallowed_model", "api_usage", "benchmark_lookup", "anomaly", "isolation"
]
JUDGE_IDS: tuple[str, ...] = (
    "contamination",
    "disallowed_model",
    "api_usage",
    "benchmark_lookup",
    "anomaly",
)
# Verdicts the trusted verifier writes itself (agent tasks' integrity audit), not `ptb judge`.
AUDIT_IDS: tuple[str, ...] = ("isolation",)
VERDICT_IDS: tuple[str, ...] = JUDGE_IDS + AUDIT_IDS
DecidedBy = Literal["override", "detector", "limit", "llm", "none"]
# What stopped a check short: a time, byte or file cap, or content that no decoder here
# reads (7z, rar, zstd without its package, high-entropy bytes: it could hide anything).
Cap = Literal["time", "bytes", "files", "decoder"]
# Below this share of LLM votes agreeing with their majority, a verdict is shown as
# low-agreement: with 3 votes a 2-1 split, with 5 votes a 3-2 split.
LOW_AGREEMENT = 0.75


class Evidence(BaseModel):
    """One finding of a deterministic detector."""

    model_config = ConfigDict(extra="forbid")

    detector: str = Field(description="name of the detector, e.g. 'ngram_overlap'")
    flagged: bool = Field(description="whether this finding alone is a violation")
    detail: str
    location: str | None = Field(
        default=None, description="file, trace event or tensor it refers to"
    )


class LimitHit(BaseModel):
    """A cap that stopped a check before it finished, or content it could not decode:
    what the check did not cover."""

    model_config = ConfigDict(extra="forbid")

    cap: Cap
    check: str = Field(description="what was cut short, e.g. 'write-set staging', 'n-gram scan'")
    detail: str


class LlmVote(BaseModel):
    """One LLM review of the trace and the code snapshot."""

    model_config = ConfigDict(extra="forbid")

    model: str
    flagged: bool
    justification: str


class Override(BaseModel):
    """A human decision that replaces everything else."""

    model_config = ConfigDict(extra="forbid")

    flagged: bool
    justification: str
    author: str | None = None


class Judgement(BaseModel):
    """The verdict of one judge on one run.

    ``flagged`` is None when the judge could not decide (an input was missing); the
    reason is then in ``justification``. A check cut short by a cap, or that met content
    no decoder here reads, is never clean: ``incomplete`` lists them and, unless a
    detector or an override decided, the run is flagged with ``decided_by = "limit"``.
    """

    model_config = ConfigDict(extra="forbid")

    judge: JudgeId
    flagged: bool | None
    decided_by: DecidedBy
    justification: str
    evidence: list[Evidence] = Field(default_factory=list)
    llm_votes: list[LlmVote] = Field(default_factory=list)
    override: Override | None = None
    incomplete: list[LimitHit] = Field(default_factory=list)
    sample_seed: str | None = Field(
        default=None,
        description="seed (hex, from the OS's secure source) of the weight positions sampled",
    )
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    vote_agreement: float | None = Field(
        default=None,
        description="share of the LLM votes that agree with their majority (a tie flags); "
        "None below two votes. Always recomputed from llm_votes.",
    )

    @model_validator(mode="after")
    def _agreement_of_votes(self) -> Judgement:
        self.vote_agreement = vote_agreement(self.llm_votes)
        return self

    @property
    def low_agreement(self) -> bool:
        """Whether the LLM votes split more than LOW_AGREEMENT allows."""
        return self.vote_agreement is not None and self.vote_agreement < LOW_AGREEMENT

    @staticmethod
    def filename(judge: str) -> str:
        """`judgement_<id>.json`."""
        return f"judgement_{judge}.json"

    def write(self, out_dir: str | Path) -> Path:
        """Write atomically into out_dir (temp file + rename)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        return write_text_atomic(
            out / self.filename(self.judge), self.model_dump_json(indent=2) + "\n"
        )

    @classmethod
    def read(cls, path: str | Path) -> Judgement:
        """Read and validate one judgement file."""
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))


def vote_agreement(votes: list[LlmVote]) -> float | None:
    """Share of *votes* that agree with their majority (a tie counts as flagged, as in the
    LLM review's decision); None for fewer than two votes."""
    if len(votes) < 2:
        return None
    flagged = sum(1 for v in votes if v.flagged)
    majority_flags = flagged * 2 >= len(votes)
    agreeing = flagged if majority_flags else len(votes) - flagged
    return agreeing / len(votes)
