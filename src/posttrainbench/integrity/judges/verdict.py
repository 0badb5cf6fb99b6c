"""`judgement_<id>.json`: what one judge decided about one run, and why."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

JudgeId = Literal["contamination", "disallowed_model", "api_usage", "benchmark_lookup", "anomaly"]
JUDGE_IDS: tuple[str, ...] = ("contamination", "disallowed_model", "api_usage", "benchmark_lookup", "anomaly")
DecidedBy = Literal["override", "detector", "llm", "none"]


class Evidence(BaseModel):
    """One finding of a deterministic detector."""

    model_config = ConfigDict(extra="forbid")

    detector: str = Field(description="name of the detector, e.g. 'ngram_overlap'")
    flagged: bool = Field(description="whether this finding alone is a violation")
    detail: str
    location: Optional[str] = Field(default=None, description="file, trace event or tensor it refers to")


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
    author: Optional[str] = None


class Judgement(BaseModel):
    """The verdict of one judge on one run.

    ``flagged`` is None when the judge could not decide (an input was missing); the
    reason is then in ``justification``.
    """

    model_config = ConfigDict(extra="forbid")

    judge: JudgeId
    flagged: Optional[bool]
    decided_by: DecidedBy
    justification: str
    evidence: list[Evidence] = Field(default_factory=list)
    llm_votes: list[LlmVote] = Field(default_factory=list)
    override: Optional[Override] = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    @staticmethod
    def filename(judge: str) -> str:
        """`judgement_<id>.json`."""
        return f"judgement_{judge}.json"

    def write(self, out_dir: str | Path) -> Path:
        """Write atomically into out_dir (temp file + rename)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / self.filename(self.judge)
        fd, tmp = tempfile.mkstemp(prefix=".judgement.", dir=out)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(self.model_dump_json(indent=2) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: str | Path) -> "Judgement":
        """Read and validate one judgement file."""
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
