"""`ptb results flagged`: the runs a judge flagged, with the judges' justifications."""

from __future__ import annotations

from pydantic import BaseModel, Field

from posttrainbench.core.errors import PtbError
from posttrainbench.core.verdict import VERDICT_IDS, Judgement
from posttrainbench.host.results.record import ResultRecord


class FlaggedRun(BaseModel):
    """One flagged run and the verdicts that flag it."""

    id: str
    agent: str
    benchmark: str
    base_model: str
    trial_name: str
    job_name: str
    score: float | None = None
    verdicts: list[Judgement] = Field(description="only the flagging ones")


def flagged_runs(records: list[ResultRecord], judge: str | None = None) -> list[FlaggedRun]:
    """Runs flagged by any judge, or by *judge* only; ordered by agent, benchmark, model, start."""
    if judge is not None and judge not in VERDICT_IDS:
        raise PtbError(f"unknown judge {judge!r}; choose one of: {', '.join(VERDICT_IDS)}")
    found: list[FlaggedRun] = []
    for r in sorted(
        records, key=lambda r: (r.agent_label, r.benchmark, r.base_model, str(r.time.started_at))
    ):
        hits = [v for v in r.flagging_judges if judge is None or v.judge == judge]
        if hits:
            found.append(
                FlaggedRun(
                    id=r.id,
                    agent=r.agent_label,
                    benchmark=r.benchmark,
                    base_model=r.base_model,
                    trial_name=r.trial_name,
                    job_name=r.job_name,
                    score=r.score,
                    verdicts=hits,
                )
            )
    return found
