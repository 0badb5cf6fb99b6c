"""What a judge's deterministic detectors found: evidence, and the inputs they lacked."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.verdict import Cap, Evidence, LimitHit


class Detection(BaseModel):
    """The detectors' result for one judge.

    ``missing`` names inputs a detector needed and did not get (no trace, no
    final_model, ...): with nothing else to decide, the judge then cannot judge.
    ``incomplete`` names checks a cap cut short: the judge then cannot clear the run.
    """

    model_config = ConfigDict(extra="forbid")

    evidence: list[Evidence] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    incomplete: list[LimitHit] = Field(default_factory=list)
    sample_seed: str | None = None

    @property
    def flagged(self) -> bool:
        """Whether any finding is a violation on its own."""
        return any(e.flagged for e in self.evidence)

    def add(self, detector: str, flagged: bool, detail: str, location: str | None = None) -> None:
        """Record one finding."""
        self.evidence.append(
            Evidence(detector=detector, flagged=flagged, detail=detail, location=location)
        )

    def cut_short(self, cap: Cap, check: str, detail: str) -> None:
        """Record a check that a cap stopped before it finished."""
        self.incomplete.append(LimitHit(cap=cap, check=check, detail=detail))
