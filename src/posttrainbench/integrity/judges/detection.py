"""What a judge's deterministic detectors found: evidence, and the inputs they lacked."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.integrity.judges.verdict import Evidence


class Detection(BaseModel):
    """The detectors' result for one judge.

    ``missing`` names inputs a detector needed and did not get (no trace, no
    final_model, ...): with nothing else to decide, the judge then cannot judge.
    """

    model_config = ConfigDict(extra="forbid")

    evidence: list[Evidence] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """Whether any finding is a violation on its own."""
        return any(e.flagged for e in self.evidence)

    def add(self, detector: str, flagged: bool, detail: str, location: str | None = None) -> None:
        """Record one finding."""
        self.evidence.append(Evidence(detector=detector, flagged=flagged, detail=detail, location=location))
