"""Which of a cell's runs count when their scores come from different task versions.

A fixed scorer gets a new task version (posttrainbench.host.tasks.task_version). Scores from
two versions are not comparable, so by default a cell uses only its newest version's
scored runs and says what it left out; `ptb rescore` re-scores the older runs' stored
models at the new version. Errored runs are kept whatever their version: they have no
score to mix, and their count and cost still belong to the cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from posttrainbench.host.results.record import ResultRecord

SCORED_KINDS = ("completed", "no_model")
UNVERSIONED = "unversioned"
_OLDEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class VersionedRuns:
    """A cell's runs at the version it uses."""

    runs: list[ResultRecord]
    version: str | None
    """the version the cell's scores come from (None: unversioned runs only, or none)"""
    note: str | None
    """set when the cell's runs were scored by more than one version"""


def _compiled_at(record: ResultRecord) -> datetime:
    return record.task_compiled_at or _OLDEST


def newest_version(records: list[ResultRecord]) -> str | None:
    """The version compiled last among *records* (an unversioned run is the oldest)."""
    if not records:
        return None
    return max(records, key=_compiled_at).task_version


def current_runs(runs: list[ResultRecord], *, all_versions: bool = False) -> VersionedRuns:
    """*runs* limited to the newest version's scored runs plus every errored run; with
    *all_versions*, every run (a mixed cell then only says so)."""
    scored = [r for r in runs if r.status in SCORED_KINDS]
    versions = {r.task_version for r in scored}
    newest = newest_version(scored)
    if len(versions) <= 1:
        return VersionedRuns(runs, newest, None)
    names = ", ".join(sorted(v or UNVERSIONED for v in versions))
    if all_versions:  # a re-scored run then counts once, by its newer score
        superseded = {r.rescore_of for r in runs if r.rescore_of}
        mixed = [r for r in runs if r.id not in superseded]
        return VersionedRuns(
            mixed, None, f"mixes scores of {len(versions)} task versions ({names})"
        )
    kept = [r for r in runs if r.status not in SCORED_KINDS or r.task_version == newest]
    left_out = len(runs) - len(kept)
    note = (
        f"scored by {len(versions)} task versions ({names}): only {newest} is used; "
        f"{left_out} run(s) of older versions left out (`ptb rescore` re-scores their "
        "stored models)"
    )
    return VersionedRuns(kept, newest, note)
