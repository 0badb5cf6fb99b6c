"""`ptb results export`: Harbor job and trial directories into a results store.

Incremental: a trial already in the store with the same fingerprint is skipped before it
is even parsed; one whose result or verdicts changed since (say `ptb judge` ran again)
is replaced. A trial still running is left for a later export, and a malformed one is
reported and skipped. Worker processes read and stage trials; only the parent renames
staged runs into place, one at a time.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from posttrainbench.errors import PtbError
from posttrainbench.integrity.traces.trial_files import TRIAL_LOG
from posttrainbench.results.harbor_trial import (
    RESULT_FILE,
    TrialInProgress,
    TrialReadError,
    fingerprint,
    is_trial_result,
    read_harbor_file,
    read_trial,
    trial_id,
)
from posttrainbench.results.run_files import stage_run_files
from posttrainbench.results.store import ResultsStore
from posttrainbench.results.trial_volumes import release_volumes
from posttrainbench.safe_fs import SafeDir

# Trial subdirectories that never hold another trial: not worth walking into.
_LEAF_DIRS = {
    "agent",
    "artifacts",
    "verifier",
    "judges",
    "environment",
    "solution",
    "tests",
    "tasks",
}
MAX_DEPTH = 6
POOL_THRESHOLD = 64  # below this many trials, starting workers costs more than it saves


class ExportSummary(BaseModel):
    """What one export did."""

    results_dir: str
    added: list[str] = Field(
        default_factory=list, description="trial dirs exported for the first time"
    )
    updated: list[str] = Field(
        default_factory=list, description="trial dirs whose result or verdicts changed"
    )
    unchanged: int = 0
    in_progress: list[str] = Field(
        default_factory=list,
        description="trials with no result.json yet (running, or their job was killed)",
    )
    skipped: list[str] = Field(
        default_factory=list, description="'<trial dir>: <why>' for unusable trials"
    )
    volumes_removed: list[str] = Field(
        default_factory=list, description="cloud trials' final_model volumes removed"
    )
    warnings: list[str] = Field(
        default_factory=list, description="'<trial dir>: <what>' for stored runs"
    )


@dataclass(frozen=True)
class _Job:
    trial: FoundTrial
    known: str | None  # the stored fingerprint of this trial id, if any
    staging: Path
    with_final_model: bool


@dataclass(frozen=True)
class _Outcome:
    kind: Literal["staged", "unchanged", "in_progress", "skipped"]
    trial_dir: Path
    run_id: str = ""
    fingerprint: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class FoundTrial:
    """A trial directory and its result.json text (None: Harbor has not written it yet)."""

    path: Path
    text: str | None
    readable: bool = True


def _is_regular(root: SafeDir, name: str) -> bool:
    found = root.lstat(name)
    return found is not None and stat.S_ISREG(found.st_mode)


def _classify(directory: Path) -> FoundTrial | None:
    try:
        root = SafeDir.open(directory)
    except OSError:
        return None
    with root:
        # Harbor writes trial.log only in trial directories (a job has job.log).
        is_trial = _is_regular(root, TRIAL_LOG)
        if root.lstat(RESULT_FILE) is None:
            return FoundTrial(directory, None) if is_trial else None
        try:
            text = read_harbor_file(root, RESULT_FILE)  # a link or FIFO in its place is refused
        except (OSError, UnicodeDecodeError):
            text = ""
    if text and is_trial_result(text):
        return FoundTrial(directory, text)
    return FoundTrial(directory, text, readable=False) if is_trial else None


def find_trials(root: Path) -> Iterator[FoundTrial]:
    """The trials under a jobs dir, a job dir, a ptb run dir or a trial dir, in path order."""
    stack = [(Path(root), 0)]
    while stack:
        directory, depth = stack.pop()
        found = _classify(directory)
        if found is not None:
            yield found
            continue
        if depth >= MAX_DEPTH:
            continue
        try:
            children = sorted(
                (p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()), reverse=True
            )
        except OSError:
            continue
        stack.extend((child, depth + 1) for child in children if child.name not in _LEAF_DIRS)


def _prepare(job: _Job) -> _Outcome:
    """Read one trial and stage its run directory (runs in a worker process)."""
    where = job.trial.path
    if job.trial.text is None:
        return _Outcome("in_progress", where)
    if not job.trial.readable:
        return _Outcome(
            "skipped",
            where,
            message=f"{RESULT_FILE} is unreadable or not a trial result (half-written?)",
        )
    try:
        source = read_trial(where, job.trial.text)
    except TrialInProgress:
        return _Outcome("in_progress", where)
    except TrialReadError as exc:
        return _Outcome("skipped", where, message=str(exc))
    record = source.record
    if job.known == record.fingerprint:
        return _Outcome("unchanged", where, record.id)
    staged = job.staging / record.id
    shutil.rmtree(staged, ignore_errors=True)
    try:
        staged.mkdir(parents=True)
        warnings = stage_run_files(staged, source, where, job.with_final_model)
    except OSError as exc:
        shutil.rmtree(staged, ignore_errors=True)
        return _Outcome("skipped", where, message=f"cannot copy its files ({exc.strerror or exc})")
    return _Outcome("staged", where, record.id, record.fingerprint, warnings=tuple(warnings))


def export(
    job_dirs: list[Path],
    results_dir: Path,
    *,
    with_final_model: bool = False,
    workers: int | None = None,
    keep_volumes: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ExportSummary:
    """Export every finished trial under *job_dirs* into the store at *results_dir*.

    A cloud trial's final_model volume is removed once its run is stored, unless
    *keep_volumes* (with *with_final_model*, only after its model was copied).
    *progress* is called with (trials done, trials found) as the export goes.
    """
    missing = [str(d) for d in job_dirs if not Path(d).is_dir()]
    if missing:
        raise PtbError(f"not a directory: {', '.join(missing)}")
    if workers is not None and workers < 1:
        raise PtbError(f"invalid --workers {workers}: must be 1 or more")
    store = ResultsStore.open(results_dir, create=True)
    summary = ExportSummary(results_dir=str(store.root))
    with store.locked():
        known = store.fingerprints()
        stored: list[tuple[Path, str]] = []  # (trial dir, run id) of every trial now in the store
        jobs: list[_Job] = []
        seen: set[Path] = set()
        first_of: dict[str, Path] = {}
        for root in job_dirs:
            for trial in find_trials(Path(root)):
                if trial.path.resolve() in seen:
                    continue
                seen.add(trial.path.resolve())
                run_id = trial_id(trial.text) if trial.text and trial.readable else None
                if run_id is not None and run_id in first_of:
                    # A copy of a trial (same Harbor id): one run in the store, never two.
                    summary.skipped.append(
                        f"{trial.path}: the same trial (id {run_id}) as {first_of[run_id]}"
                    )
                    continue
                if run_id is not None:
                    first_of[run_id] = trial.path
                stored_print = known.get(run_id) if run_id else None
                if stored_print is not None and stored_print == fingerprint(trial.path):
                    summary.unchanged += (
                        1  # cheap check here: unchanged trials never reach a worker
                    )
                    stored.append((trial.path, run_id))
                    continue
                jobs.append(_Job(trial, stored_print, store.staging, with_final_model))
        store.staging.mkdir(exist_ok=True)
        for done, outcome in enumerate(_outcomes(jobs, workers or os.cpu_count() or 1), start=1):
            _record(store, outcome, known, summary)
            if outcome.kind in ("staged", "unchanged") and outcome.run_id:
                stored.append((outcome.trial_dir, outcome.run_id))
            if progress is not None:
                progress(done, len(jobs))
        store.recover()  # drops the (now empty) staging directory
        removed, warnings = release_volumes(
            [(trial, store.runs / run_id) for trial, run_id in stored],
            keep=keep_volumes,
            with_final_model=with_final_model,
        )
        summary.volumes_removed.extend(removed)
        summary.warnings.extend(warnings)
    return summary


def _outcomes(jobs: list[_Job], workers: int) -> Iterator[_Outcome]:
    if workers == 1 or len(jobs) < POOL_THRESHOLD:
        yield from map(_prepare, jobs)
        return
    # spawn, not fork: the CLI's progress bar (and libraries) run threads, and forking a
    # threaded process can deadlock the child. The start-up costs about a second.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap(_prepare, jobs, chunksize=16)


def _record(
    store: ResultsStore, outcome: _Outcome, known: dict[str, str], summary: ExportSummary
) -> None:
    where = str(outcome.trial_dir)
    if outcome.kind == "unchanged":
        summary.unchanged += 1
    elif outcome.kind == "in_progress":
        summary.in_progress.append(where)
    elif outcome.kind == "skipped":
        summary.skipped.append(f"{where}: {outcome.message}")
    else:
        summary.warnings.extend(outcome.warnings)
        previous = known.get(outcome.run_id)
        store.commit(store.staging / outcome.run_id, outcome.run_id)
        known[outcome.run_id] = outcome.fingerprint
        (summary.updated if previous is not None else summary.added).append(where)
