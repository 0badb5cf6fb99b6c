"""`ptb results import`: a PostTrainBench results directory (HTCondor runs) into a results store.

Every `<method>/<benchmark>_<org>_<model>_<run id>/` (`ptb_layout`) becomes one run record,
so one leaderboard holds PostTrainBench's runs beside ours: the method is the agent (each
method its own leaderboard entry, as each is its own `final_<method>.csv` there), its
`_<N>h` the time budget, the run id the order of the cell's runs. Its two judgement files
(or, where they are absent, the `judge_result.json` of branch new_judge_v2) become our
contamination and disallowed-model verdicts; `metrics.json`'s accuracy the score; without
one, the outcome its collect.py labels (`not avl.`, `not stored`, `ERR`). The traces are
kept as the run's trace files.

A run dir that cannot be mapped (a name its collect.py cannot split, an unknown benchmark
or base model, a malformed `metrics.json`, a missing or unknown judgement) is listed with
why and left out; nothing of it reaches the store, and no stored run changes for it. A
run dir imported before is recognised by its content and left alone unless it changed.
Everything is read through `safe_fs` (no link followed, capped): its run dirs also hold
what the agent wrote.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from posttrainbench.core.errors import PtbError
from posttrainbench.core.nofollow import Refused
from posttrainbench.core.safe_fs import CopyBudget, SafeDir
from posttrainbench.core.verdict import Judgement
from posttrainbench.host.catalog import list_benchmarks
from posttrainbench.host.copy_caps import CopyCaps
from posttrainbench.host.results.ptb_layout import (
    CONTAMINATION_FILE,
    CONTAMINATION_TEXT,
    DISALLOWED_FILE,
    DISALLOWED_TEXT,
    FINAL_MODEL_DIR,
    IMPORTED_JOB_PREFIX,
    JUDGE_RESULT_FILE,
    METRICS_FILE,
    SKIP_METHODS,
    SOLVE_OUT_FILE,
    SOLVE_PARSED_FILE,
    TIME_TAKEN_FILE,
    JudgeResult,
    LayoutError,
    PtbMetrics,
    RunDirName,
    catalog_model_of,
    imported_run_id,
    method_budget,
    parse_hms,
)
from posttrainbench.host.results.record import (
    ResultRecord,
    RunStatus,
    TimeUsed,
    Usage,
    combine_flags,
)
from posttrainbench.host.results.run_files import TRACE_PREFIX, MemorySink
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.results.store_db import StoredRun, stored_run
from posttrainbench.task.integrity.traces.trial_files import MAX_TRACE_BYTES

MAX_SMALL_FILE = 1 * 2**20  # metrics.json, a judgement, time_taken.txt: far larger is not one
READER_VERSION = "ptb-import-1"  # part of every fingerprint: bump when the mapping changes
_VERDICT_JUDGES = 2  # contamination and disallowed model: all PostTrainBench's collect reads


class PtbImportSummary(BaseModel):
    """What one import did."""

    results_dir: str
    added: list[str] = Field(default_factory=list, description="run dirs imported first now")
    updated: list[str] = Field(default_factory=list, description="run dirs that changed")
    unchanged: int = 0
    skipped: list[str] = Field(
        default_factory=list, description="'<run dir>: <why>' for each one not imported"
    )
    ignored: list[str] = Field(
        default_factory=list,
        description="method dirs its collect.py skips too (baselines come from baselines.json)",
    )


@dataclass
class _Verdicts:
    contamination: bool
    disallowed: bool
    why_contamination: str
    why_disallowed: str


def _small(root: SafeDir, name: str) -> bytes | None:
    """A small file of the run dir, or None when it is absent (a link or FIFO: LayoutError)."""
    if root.lstat(name) is None:
        return None
    try:
        return root.read_bytes(name, MAX_SMALL_FILE)
    except Refused as exc:
        raise LayoutError(str(exc)) from None
    except OSError as exc:
        raise LayoutError(f"{name}: cannot read ({exc.strerror or exc})") from None


def _text_verdict(name: str, data: bytes, texts: dict[bool, str]) -> bool:
    content = data.decode("utf-8", errors="replace").strip()
    for flagged, text in texts.items():
        if content == text:
            return flagged
    expected = " or ".join(repr(t) for t in texts.values())
    raise LayoutError(f"{name}: {content[:80]!r} is not a verdict (expected {expected})")


def _verdicts(files: dict[str, bytes | None]) -> _Verdicts:
    """Its two judgement files, as its collect.py reads them, else judge_result.json."""
    contamination, disallowed = files[CONTAMINATION_FILE], files[DISALLOWED_FILE]
    if contamination is not None and disallowed is not None:
        c = _text_verdict(CONTAMINATION_FILE, contamination, CONTAMINATION_TEXT)
        d = _text_verdict(DISALLOWED_FILE, disallowed, DISALLOWED_TEXT)
        return _Verdicts(
            c,
            d,
            f"PostTrainBench {CONTAMINATION_FILE}: {CONTAMINATION_TEXT[c]!r}",
            f"PostTrainBench {DISALLOWED_FILE}: {DISALLOWED_TEXT[d]!r}",
        )
    aggregated = files[JUDGE_RESULT_FILE]
    if aggregated is None:
        missing = [n for n in (CONTAMINATION_FILE, DISALLOWED_FILE) if files[n] is None]
        raise LayoutError(f"missing judgement: no {', no '.join([*missing, JUDGE_RESULT_FILE])}")
    try:
        result = JudgeResult.model_validate_json(aggregated)
    except ValidationError as exc:
        raise LayoutError(f"{JUDGE_RESULT_FILE}: malformed ({_first_error(exc)})") from None
    # Its scripts read contamination and disallowed_model alone (new_judge_v2's
    # aggregate_contamination.py); the API judge's verdict is kept in the justification.
    why_api = (
        f"[api, not part of its fallback] disallowed_api_usage={result.disallowed_api_usage}: "
        f"{result.justification_disallowed_api_usage or ''}"
        if result.disallowed_api_usage is not None
        else ""
    )
    return _Verdicts(
        result.contamination,
        result.disallowed_model,
        result.justification_contamination or f"PostTrainBench {JUDGE_RESULT_FILE}",
        "\n\n".join(j for j in (result.justification_disallowed_model, why_api) if j)
        or f"PostTrainBench {JUDGE_RESULT_FILE}",
    )


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the document"
    return f"{where}: {first['msg']}"


def _score(data: bytes | None) -> float | None:
    """metrics.json's accuracy; None without one (or with a null accuracy, as there)."""
    if data is None:
        return None
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise LayoutError(f"{METRICS_FILE}: malformed (not JSON: {exc})") from None
    if not isinstance(raw, dict):
        raise LayoutError(f"{METRICS_FILE}: malformed (not a JSON object)")
    if raw.get("accuracy") is None:
        return None
    try:
        return PtbMetrics.model_validate(raw).accuracy
    except ValidationError as exc:
        raise LayoutError(f"{METRICS_FILE}: malformed ({_first_error(exc)})") from None


def _outcome(score: float | None, root: SafeDir, timed: bool) -> tuple[RunStatus, str | None]:
    """The outcome its load_metrics labels a run without a score by."""
    if score is not None:
        return "completed", None
    if not timed:
        return "infra_error", "PostTrainBench: no metrics.json and no time_taken.txt ('not avl.')"
    if not root.is_dir(FINAL_MODEL_DIR):
        return "no_model", "PostTrainBench: no metrics.json and no final_model/ ('not stored')"
    return "verifier_error", "PostTrainBench: final_model/ but no metrics.json ('ERR')"


@dataclass
class _Read:
    record: ResultRecord
    files: dict[str, str]  # stored name -> name in the run dir (the traces)


def _read_run(root: SafeDir, method: str, name: str, where: str) -> _Read:
    """Map one run dir onto a record (its trace files still to copy); LayoutError if it cannot."""
    run_dir = RunDirName.parse(name)
    if run_dir.benchmark not in {b.id for b in list_benchmarks()}:
        raise LayoutError(f"unknown benchmark {run_dir.benchmark!r}")
    base_model = catalog_model_of(run_dir.hf_id)
    if base_model is None:
        raise LayoutError(f"unknown base model {run_dir.hf_id!r} (not a catalog model)")
    names = (METRICS_FILE, CONTAMINATION_FILE, DISALLOWED_FILE, JUDGE_RESULT_FILE, TIME_TAKEN_FILE)
    files = {n: _small(root, n) for n in names}
    verdicts = _verdicts(files)
    score = _score(files[METRICS_FILE])
    time_text = files[TIME_TAKEN_FILE]
    seconds = parse_hms(time_text.decode("utf-8", errors="replace")) if time_text else None
    status, error = _outcome(score, root, time_text is not None)
    budget = method_budget(method)
    hours = budget.hours if budget else None
    gpus = budget.gpus if budget else 1
    agent_hours = seconds / 3600 if seconds is not None else None
    judgements = [
        Judgement(
            judge="contamination",
            flagged=verdicts.contamination,
            decided_by="llm",
            justification=verdicts.why_contamination,
        ),
        Judgement(
            judge="disallowed_model",
            flagged=verdicts.disallowed,
            decided_by="llm",
            justification=verdicts.why_disallowed,
        ),
    ]
    traces = [n for n in (SOLVE_OUT_FILE, SOLVE_PARSED_FILE) if root.lstat(n) is not None]
    digest = hashlib.sha256(READER_VERSION.encode())
    for n in names:
        data = files[n]
        digest.update(f"\0{n}\0".encode() + (data if data is not None else b"-"))
    for n in traces:
        st = root.lstat(n)
        digest.update(f"\0{n}\0{st.st_size if st else -1}\0{st.st_mtime_ns if st else -1}".encode())
    digest.update(f"\0final_model\0{root.is_dir(FINAL_MODEL_DIR)}".encode())
    record = ResultRecord(
        id=imported_run_id(method, run_dir),
        job_name=f"{IMPORTED_JOB_PREFIX}{method}",
        trial_name=name,
        task_name=f"posttrainbench/{run_dir.benchmark}-{base_model}",
        agent=method,
        benchmark=run_dir.benchmark,
        base_model=base_model,
        hours=hours,
        status=status,
        error=error,
        score=score,
        reward=score,
        verdicts=judgements,
        flagged=combine_flags(judgements, _VERDICT_JUDGES),
        usage=Usage(gpus=gpus, gpu_hours=gpus * (agent_hours or 0.0)),
        time=TimeUsed(budget_hours=hours, agent_hours=agent_hours),
        source_dir=where,
        fingerprint=digest.hexdigest(),
        exported_at=datetime.now(UTC),
    )
    stored = {f"{TRACE_PREFIX}{i:02d}-{n}": n for i, n in enumerate(traces)}
    return _Read(record, stored)


def _stored_run(root: SafeDir, read: _Read) -> StoredRun:
    """The run's record and its traces (copied under the trace caps), as rows."""
    caps = CopyCaps()
    budget = CopyBudget(
        max_bytes=caps.trace_bytes, max_files=caps.trace_files, max_file_bytes=MAX_TRACE_BYTES
    )
    sink = MemorySink()
    record = read.record
    record.trace_files = [
        stored for stored, n in read.files.items() if root.copy_file(n, sink, stored, budget)
    ]
    record.refused_files = budget.refusal_lines()
    return stored_run(record, sink.files)


def _dirs(root: SafeDir, relative: str = "") -> list[str]:
    """The real directories in a directory (links and files are not methods or runs)."""
    return [n for n, st in root.entries(relative) if st.st_mode & 0o170000 == 0o040000]


def import_ptb(ptb_dir: Path, results_dir: Path) -> PtbImportSummary:
    """Import every run dir of the PostTrainBench results dir *ptb_dir* into the store."""
    if not ptb_dir.is_dir():
        raise PtbError(f"not a directory: {ptb_dir}")
    store = ResultsStore.open(results_dir, create=True)
    summary = PtbImportSummary(results_dir=str(store.root))
    with store.locked(), SafeDir.open(ptb_dir) as top:
        known = {p.run_id: p.fingerprint for p in store.prints()}
        try:
            for method in _dirs(top):
                if method in SKIP_METHODS:
                    summary.ignored.append(str(ptb_dir / method))
                    continue
                for name in _dirs(top, method):
                    where = str(ptb_dir / method / name)
                    try:
                        with top.subdir(f"{method}/{name}") as root:
                            read = _read_run(root, method, name, where)
                            before = known.get(read.record.id)
                            if before == read.record.fingerprint:
                                summary.unchanged += 1
                                continue
                            run = _stored_run(root, read)
                    except LayoutError as exc:
                        summary.skipped.append(f"{where}: {exc}")
                        continue
                    except OSError as exc:
                        summary.skipped.append(f"{where}: cannot read ({exc.strerror or exc})")
                        continue
                    store.commit([run])  # the run is in the store from this commit on
                    (summary.updated if before is not None else summary.added).append(where)
                    known[run.run_id] = read.record.fingerprint
        finally:
            store.close()
    return summary
