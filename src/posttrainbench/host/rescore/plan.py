"""Which stored runs `ptb rescore` can score again, and why the others cannot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.errors import PtbError
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.task.schemas import TaskSpec


class NotRescorable(BaseModel):
    """A selected run that cannot be re-scored, with the one-line reason."""

    model_config = ConfigDict(extra="forbid")

    id: str
    agent: str
    benchmark: str
    base_model: str
    why: str


@dataclass(frozen=True)
class Candidate:
    """A stored run whose final_model can be scored again."""

    record: ResultRecord
    spec: TaskSpec
    final_model: Path
    snapshot: Path | None


def _why_not(record: ResultRecord, run_dir: Path) -> str | None:
    if record.status == "no_model":
        return "the agent left no usable final_model: there is nothing to score"
    if record.status != "completed":
        return f"the trial ended with {record.status}: re-run it rather than re-score it"
    if record.task_spec is None:
        return "its record has no task spec (exported before re-scoring existed): export it again"
    if record.final_model_dir is None:
        return "its final_model was not stored (`ptb results export --with-final-model` stores it)"
    if not (run_dir / record.final_model_dir).is_dir():
        return f"its stored final_model is missing ({run_dir / record.final_model_dir})"
    return None


def plan(
    records: list[ResultRecord],
    runs_dir: Path,
    *,
    benchmarks: list[str] | None = None,
    run_ids: list[str] | None = None,
) -> tuple[list[Candidate], list[NotRescorable]]:
    """Split the store's agent runs (not earlier re-scores) that match the filters.

    A run id that is in no record is a user error, reported before anything runs.
    """
    originals = [r for r in records if r.rescore_of is None]
    if run_ids:
        known = {r.id for r in originals} | {r.trial_name for r in originals}
        unknown = [i for i in run_ids if i not in known]
        if unknown:
            raise PtbError(f"no agent run {', '.join(map(repr, unknown))} in the results store")
        originals = [r for r in originals if r.id in run_ids or r.trial_name in run_ids]
    if benchmarks:
        originals = [r for r in originals if r.benchmark in benchmarks]
    candidates: list[Candidate] = []
    refused: list[NotRescorable] = []
    for record in originals:
        run_dir = runs_dir / record.id
        why = _why_not(record, run_dir)
        if why is not None or record.task_spec is None or record.final_model_dir is None:
            refused.append(
                NotRescorable(
                    id=record.id,
                    agent=record.agent_label,
                    benchmark=record.benchmark,
                    base_model=record.base_model,
                    why=why or "",
                )
            )
            continue
        snapshot = run_dir / record.snapshot_dir if record.snapshot_dir else None
        candidates.append(
            Candidate(record, record.task_spec, run_dir / record.final_model_dir, snapshot)
        )
    return candidates, refused
