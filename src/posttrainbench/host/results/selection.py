"""Which runs of one cell make its score: the selection policy, stated and explicit.

- ``latest``: the most recently started scored run. A better earlier run is named in
  the cell's note, so a retry never silently replaces a better result.
- ``best``: the highest-scoring run (ties: the earlier one).
- ``mean``: the mean over all scored runs (the default: best-of-k flatters an agent).
- ``ptb``: PostTrainBench's own rule (its scripts/collect.py, branch qol_multigpu): the
  latest run whatever became of it; its score only if it completed and both of
  PostTrainBench's verdicts are clean (`ptb_layout.is_clean`), else the base model's
  zero-shot score in its baselines.json. An earlier good run never stands in.

For the first three, only scored runs that no judge flagged take part. Errored and
flagged runs are kept in the store and counted in the cell, never scored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.table import Policy

POLICIES: tuple[str, ...] = ("mean", "latest", "best", "ptb")


@dataclass(frozen=True)
class Selection:
    """A policy's pick among the candidate runs of one cell."""

    score: float | None
    selected: list[str]
    mean: float | None
    stderr: float | None
    best: float | None
    latest: float | None
    note: str | None = None


def start_order(record: ResultRecord) -> tuple[str, str]:
    """Sort key: start time, then trial id (deterministic for equal times)."""
    started = record.time.started_at.isoformat() if record.time.started_at else ""
    return (started, record.id)


def mean_stderr(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (None below two values)."""
    if not values:
        return None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var / len(values))


def select(candidates: list[ResultRecord], policy: Policy) -> Selection:
    """Apply *policy* to the scored, unflagged runs of one cell."""
    runs = sorted(candidates, key=start_order)
    if not runs:
        return Selection(None, [], None, None, None, None)
    scores = [r.score for r in runs]
    mean, stderr = mean_stderr(scores)
    best_run = next(r for r in runs if r.score == max(scores))  # the earliest among ties
    latest_run = runs[-1]
    common = dict(mean=mean, stderr=stderr, best=best_run.score, latest=latest_run.score)
    if policy == "mean":
        return Selection(score=mean, selected=[r.id for r in runs], **common)
    if policy == "best":
        note = f"best of {len(runs)} runs" if len(runs) > 1 else None
        return Selection(score=best_run.score, selected=[best_run.id], note=note, **common)
    note = None
    if latest_run.score < best_run.score:
        note = (
            f"latest run ({latest_run.score:.4f}) is below an earlier run ({best_run.score:.4f}, "
            f"{best_run.trial_name}); policy 'latest' keeps the latest"
        )
    return Selection(score=latest_run.score, selected=[latest_run.id], note=note, **common)
