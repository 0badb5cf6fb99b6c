"""`ptb results export --layout ptb`: a results store as PostTrainBench's results directory.

Each run of the store becomes `<method>/<benchmark>_<org>_<model>_<run id>/` (`ptb_layout`),
with what PostTrainBench's scripts/collect.py reads, so that its `final_<method>.csv` holds
the cells `ptb results collect --policy ptb` computes: a completed run's `metrics.json`, the
two judgement files wherever our judges decided (a missing one is an error there, never
clean), `time_taken.txt`, the trace as `solve_out.txt` and `solve_parsed.txt`, and, with
*with_final_model*, a stored `final_model/`. A cell holds the runs its leaderboard cell uses
(the newest task version's, `task_versions`), numbered in start order, so its latest run is
the leaderboard's. A run the layout cannot name (no time budget, a model without an org, an
`_` inside a name its collect.py splits) is listed and left out.

The directory is written beside the target and renamed into place: a reader never sees a
half export.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from posttrainbench.core.errors import PtbError
from posttrainbench.core.safe_fs import CopyBudget, SafeDir
from posttrainbench.host.copy_caps import CopyCaps
from posttrainbench.host.results.ptb_layout import (
    CONTAMINATION_FILE,
    CONTAMINATION_JUDGES,
    CONTAMINATION_TEXT,
    DISALLOWED_FILE,
    DISALLOWED_TEXT,
    FINAL_MODEL_DIR,
    JUDGE_RESULT_FILE,
    METRICS_FILE,
    SOLVE_OUT_FILE,
    SOLVE_PARSED_FILE,
    TIME_TAKEN_FILE,
    JudgeResult,
    LayoutError,
    PtbMetrics,
    RunDirName,
    format_hms,
    hf_id_of,
    judgement_flags,
    record_method,
    run_ids,
)
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.results.task_versions import current_runs
from posttrainbench.task.integrity.traces.load import parse_trace_text
from posttrainbench.task.integrity.traces.render import render_trace
from posttrainbench.task.integrity.traces.trial_files import MAX_TRACE_BYTES


class PtbExportSummary(BaseModel):
    """What one export into PostTrainBench's layout wrote and left out."""

    out_dir: str
    methods: list[str] = Field(default_factory=list, description="the method dirs written")
    runs: int = 0
    skipped: list[str] = Field(
        default_factory=list, description="'<run>: <why>' for each run not written"
    )
    warnings: list[str] = Field(
        default_factory=list, description="'<run>: <what>' for a written run missing a file"
    )


def _hf_id(record: ResultRecord) -> str:
    found = hf_id_of(record.base_model)
    if found is None and record.task_spec and record.task_spec.model_source.startswith("hf:"):
        found = record.task_spec.model_source.removeprefix("hf:")
    if found is None:
        raise LayoutError(f"no Hugging Face id for base model {record.base_model!r}")
    return found


def _justification(record: ResultRecord, contamination: bool) -> str:
    return "\n\n".join(
        f"[{v.judge}] {v.justification}"
        for v in record.verdicts
        if (v.judge in CONTAMINATION_JUDGES) == contamination
    )


def _judgement_files(record: ResultRecord) -> dict[str, str]:
    contamination, disallowed = judgement_flags(record)
    files: dict[str, str] = {}
    if contamination is not None:
        files[CONTAMINATION_FILE] = CONTAMINATION_TEXT[contamination] + "\n"
    if disallowed is not None:
        files[DISALLOWED_FILE] = DISALLOWED_TEXT[disallowed] + "\n"
    if contamination is not None and disallowed is not None:
        api = next((v.flagged for v in record.verdicts if v.judge == "api_usage"), None)
        result = JudgeResult(
            contamination=contamination,
            disallowed_model=disallowed,
            justification_contamination=_justification(record, True),
            justification_disallowed_model=_justification(record, False),
            disallowed_api_usage=api,
        )
        files[JUDGE_RESULT_FILE] = result.model_dump_json(indent=2, exclude_none=True) + "\n"
    return files


def _metrics(record: ResultRecord) -> str | None:
    if record.status != "completed" or record.score is None:
        return None  # no metrics.json: its collect.py falls back, as ours does
    stderr = record.metrics.stderr if record.metrics else None
    return PtbMetrics(accuracy=record.score, stderr=stderr).model_dump_json(exclude_none=True)


def _trace_files(store: ResultsStore, record: ResultRecord) -> tuple[dict[str, str], str | None]:
    """solve_out.txt (the stored trace or agent log) and solve_parsed.txt (it, readable)."""
    relative = record.trace_files[0] if record.trace_files else record.agent_log
    if relative is None:
        return {}, None
    try:
        data, cut = store.read_run_file(record, relative, MAX_TRACE_BYTES)
    except OSError as exc:
        return {}, f"cannot read its trace {relative} ({exc.strerror or exc})"
    text = data.decode("utf-8", errors="replace")
    parsed = render_trace(parse_trace_text(text, source=relative), max_chars=0)
    note = f"trace cut at {MAX_TRACE_BYTES} bytes" if cut else None
    return {SOLVE_OUT_FILE: text, SOLVE_PARSED_FILE: parsed}, note


def _copy_final_model(store: ResultsStore, record: ResultRecord, run_dir: Path) -> str | None:
    if record.final_model_dir is None:
        return None
    caps = CopyCaps()
    budget = CopyBudget(max_bytes=caps.final_model_bytes, max_files=caps.final_model_files)
    try:
        with SafeDir.open(store.runs / record.id, hard_links_ok=True) as root:
            root.copy_tree(record.final_model_dir, run_dir / FINAL_MODEL_DIR, budget)
    except OSError as exc:
        return f"cannot copy its final_model ({exc.strerror or exc})"
    lines = budget.refusal_lines()
    return f"final_model: {len(lines)} file(s) left out, first: {lines[0]}" if lines else None


def _write_run(
    store: ResultsStore,
    record: ResultRecord,
    run_dir: Path,
    with_final_model: bool,
) -> list[str]:
    """Write one run dir; the warning lines of what it lacks."""
    run_dir.mkdir(parents=True)
    files = _judgement_files(record)
    metrics = _metrics(record)
    if metrics is not None:
        files[METRICS_FILE] = metrics + "\n"
    if record.time.agent_hours is not None:
        files[TIME_TAKEN_FILE] = format_hms(round(record.time.agent_hours * 3600)) + "\n"
    traces, note = _trace_files(store, record)
    files.update(traces)
    for name, text in files.items():
        (run_dir / name).write_text(text, encoding="utf-8")
    notes = [note] if note else []
    if with_final_model:
        copied = _copy_final_model(store, record, run_dir)
        notes += [copied] if copied else []
    return notes


def _fresh_target(out_dir: Path) -> None:
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise PtbError(f"{out_dir} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise PtbError(f"{out_dir} is not empty; choose a new directory for the export")


def export_ptb(
    results_dir: Path,
    out_dir: Path,
    *,
    with_final_model: bool = False,
    all_versions: bool = False,
) -> PtbExportSummary:
    """Write the store at *results_dir* into a new PostTrainBench results dir *out_dir*."""
    store = ResultsStore.open(results_dir, create=False)
    _fresh_target(out_dir)
    records, unreadable = store.load()
    summary = PtbExportSummary(out_dir=str(out_dir), skipped=list(unreadable))
    cells: dict[tuple[str, str, str], list[ResultRecord]] = defaultdict(list)
    for record in records:
        try:
            method = record_method(record)
            hf_id = _hf_id(record)
            RunDirName.of(record.benchmark, hf_id, 0)  # the name must survive its split
        except LayoutError as exc:
            summary.skipped.append(f"run {record.id} ({record.trial_name}): {exc}")
            continue
        cells[(method, record.benchmark, hf_id)].append(record)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would outlive the rename
    try:
        for (method, benchmark, hf_id), runs in sorted(cells.items()):
            kept = current_runs(runs, all_versions=all_versions).runs
            numbers = run_ids(kept)
            for record in kept:
                name = RunDirName.of(benchmark, hf_id, numbers[record.id])
                notes = _write_run(store, record, staging / method / str(name), with_final_model)
                summary.warnings += [f"run {record.id} ({record.trial_name}): {n}" for n in notes]
                summary.runs += 1
        summary.methods = sorted({method for method, _, _ in cells})
        if out_dir.is_dir():
            out_dir.rmdir()  # empty (checked above): replaced by the finished export
        os.replace(staging, out_dir)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PtbError(f"cannot write {out_dir}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return summary
