"""`ptb results export`: Harbor job and trial directories into a results store.

Incremental: the store's `runs` table keeps, for each stored run, the trial directory it
came from and that trial's fingerprint (sizes and mtimes of its result and verdict
files), so a trial whose fingerprint is unchanged is skipped with a few stats, before its
result.json is even opened; one whose result or verdicts changed since (say `ptb judge`
ran again) is read and replaced. A trial still running is left for a later export, and a
malformed one is reported and skipped. Worker processes (a `ProcessPoolExecutor`, fed
chunks of trials while the parent is still walking the job directories, which finds a
trial by Harbor's trial.log without opening it) read each trial into the rows that store
it, its files as bytes (or stage its run directory, with --with-final-model); only the
parent writes the database, one transaction per chunk, and only one run per Harbor
trial id.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import shutil
import signal
import sqlite3
import stat
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from posttrainbench.core.errors import PtbError
from posttrainbench.core.safe_fs import DirSink, SafeDir
from posttrainbench.host.results.harbor_trial import (
    RESULT_FILE,
    TrialInProgress,
    TrialReadError,
    TrialSource,
    fingerprint,
    is_trial_result,
    open_trial,
    read_harbor_file,
    read_trial_at,
    trial_id,
)
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.run_files import MemorySink, stage_run_files
from posttrainbench.host.results.store import ResultsStore, StoredPrint
from posttrainbench.host.results.store_db import StoredRun, stored_run
from posttrainbench.host.results.trial_volumes import is_cloud_trial, release_volumes
from posttrainbench.task.integrity.traces.trial_files import TRIAL_LOG

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
# Trials a worker takes per message, and runs the parent commits per transaction: at 8
# the parent spent ~0.1 ms a trial more on pickling and pipes (measured on 5,000 trials);
# past 32 nothing more was saved.
_CHUNK = 32
_AHEAD = 2  # chunks submitted per worker beyond the one it reads: none waits for the parent
# Harbor writes `id` first (after `schema_version`, in the Harbor this project pins); reading
# it with a pattern saves the parent a full JSON parse per trial. Anything else (another
# writer, another order) falls back to json.
_LEADING_ID = re.compile(
    r'\s*\{\s*(?:"schema_version"\s*:\s*\d+\s*,\s*)?"id"\s*:\s*"([0-9A-Za-z-]{1,100})"'
)


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
    agent_checks: list[str] = Field(
        default_factory=list,
        description="run dirs of `ptb agents check` left out: checks, not agent runs",
    )
    volumes_removed: list[str] = Field(
        default_factory=list, description="cloud trials' final_model volumes removed"
    )
    warnings: list[str] = Field(
        default_factory=list, description="'<trial dir>: <what>' for stored runs"
    )


# Jobs and outcomes are tuples of strings: they cross a pipe once each, and a frozen
# dataclass holding Paths took ~10 us a trial to pickle and unpickle, a tuple ~1.5.
class _Job(NamedTuple):
    trial_dir: str  # canonical
    text: str | None  # result.json as the walk read it; None: the worker reads it
    known: str | None  # the stored fingerprint of this trial id (the walk knew the id), if any
    seq: int  # names the staging directory: two copies of one trial never share one


@dataclass(frozen=True)
class _Setting:
    """What every job of one export shares: sent to each worker once, not with each job."""

    known: dict[str, str]  # run id -> stored fingerprint, to tell a stored trial moved
    staging: Path
    with_final_model: bool


class _Outcome(NamedTuple):
    kind: Literal["staged", "unchanged", "in_progress", "skipped"]
    trial_dir: str
    run_id: str = ""
    fingerprint: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    run: StoredRun | None = None  # what stores it (kind "staged")
    cloud: bool = False  # a cloud trial: its final_model volume is released once stored


class FoundTrial(NamedTuple):
    """A trial directory (its canonical path) and its result.json text, when the walk read
    it. None: not read, either *indexed* (the stored run, when the trial is stored
    and its fingerprint has not changed since) or left to the worker that reads the trial
    (Harbor's trial.log told the walk it is a trial).
    """

    path: str
    text: str | None
    indexed: StoredPrint | None = None


# Written by `ptb agents check` into its run dir (posttrainbench.host.agent_check.run).
AGENT_CHECK_MARKER = "ptb-agent-check"


def _classify(directory: str, by_dir: dict[str, StoredPrint] | None = None) -> FoundTrial | None:
    if by_dir:
        entry = by_dir.get(directory)
        if entry is not None and fingerprint(Path(directory)) == entry.fingerprint:
            return FoundTrial(directory, None, indexed=entry)
    # Harbor writes trial.log only in trial directories (a job has job.log): such a
    # directory is a trial for one lstat, and the worker reading it reads its result.json
    # (the walk, in the parent, reads and ships nothing).
    try:
        log = os.stat(f"{directory}/{TRIAL_LOG}", follow_symlinks=False)
    except OSError:
        log = None
    if log is not None and stat.S_ISREG(log.st_mode):
        return FoundTrial(directory, None)  # the worker reads its result.json
    try:
        root = SafeDir.open(Path(directory))
    except OSError:
        return None
    with root:  # no trial.log: a trial only if its result.json says so (an older Harbor)
        try:
            text = read_harbor_file(root, RESULT_FILE)  # a link or FIFO is refused
        except (OSError, UnicodeDecodeError):
            return None
    return FoundTrial(directory, text) if is_trial_result(text) else None


def find_trials(
    root: Path, by_dir: dict[str, StoredPrint] | None = None, checks: list[str] | None = None
) -> Iterator[FoundTrial]:
    """The trials under a jobs dir, a job dir, a ptb run dir or a trial dir, in path order.

    *root* is resolved once; below it only real directories are entered (never a link), so
    every path found is already canonical. *by_dir* (source dir -> stored run) lets a
    stored trial whose fingerprint is unchanged be recognised without opening it. A run
    dir of ``ptb agents check`` (its AGENT_CHECK_MARKER) is not entered: a check against
    a scripted model is not an agent's run; it is added to *checks*.
    """
    stack = [(str(Path(root).resolve()), 0)]
    while stack:
        directory, depth = stack.pop()
        found = _classify(directory, by_dir)
        if found is not None:
            yield found
            continue
        if depth >= MAX_DEPTH:
            continue
        if os.path.lexists(f"{directory.rstrip('/')}/{AGENT_CHECK_MARKER}"):
            if checks is not None:
                checks.append(directory)
            continue
        try:
            # DirEntry.is_dir(follow_symlinks=False) answers from the listing: no stat per child.
            with os.scandir(directory) as listing:
                children = sorted(
                    (e.name for e in listing if e.is_dir(follow_symlinks=False)), reverse=True
                )
        except OSError:
            continue
        prefix = directory.rstrip("/") + "/"  # the root directory "/" ends in one already
        stack.extend((prefix + name, depth + 1) for name in children if name not in _LEAF_DIRS)


def _run_id(text: str) -> str | None:
    found = _LEADING_ID.match(text)
    return found.group(1) if found else trial_id(text)


class _Walk:
    """Finds the trials to export and decides, in path order, which need a worker.

    It advances as the workers ask for more trials, between the parent's commits; its
    tallies are merged into the summary at the end.
    """

    def __init__(self, roots: list[Path], prints: list[StoredPrint]):
        self.roots = roots
        self.known = {p.run_id: p.fingerprint for p in prints}
        self.by_dir = {p.source_dir: p for p in prints}
        self.unchanged: list[tuple[str, str]] = []  # (trial dir, run id)
        self.skipped: list[str] = []
        self.checks: list[str] = []  # agent-check run dirs left out
        self.found = 0
        self.finished = False
        # run id -> the first trial dir found with it, of the trials whose id the walk knows
        # (a stored one, or one without trial.log); the rest are told apart once read
        self.first_of: dict[str, str] = {}

    def jobs(self) -> Iterator[_Job]:
        """The trials a worker must read, in path order; unchanged ones are tallied instead."""
        seen: set[str] = set()
        first_of = self.first_of
        for root in self.roots:
            for trial in find_trials(Path(root), self.by_dir, self.checks):
                if trial.path in seen:
                    continue
                seen.add(trial.path)
                self.found += 1
                if trial.indexed is not None:
                    run_id: str | None = trial.indexed.run_id
                else:
                    run_id = _run_id(trial.text) if trial.text else None
                if run_id is not None and run_id in first_of:
                    # A copy of a trial (same Harbor id): one run in the store, never two.
                    self.skipped.append(
                        f"{trial.path}: the same trial (id {run_id}) as {first_of[run_id]}"
                    )
                    continue
                if run_id is not None:
                    first_of[run_id] = trial.path
                if trial.indexed is not None:
                    self.unchanged.append((trial.path, trial.indexed.run_id))
                    continue
                stored_print = self.known.get(run_id) if run_id else None
                if stored_print is not None and stored_print == fingerprint(trial.path):
                    # the same trial found at another path (moved): unchanged, no worker
                    self.unchanged.append((trial.path, run_id or ""))
                    continue
                yield _Job(trial.path, trial.text, stored_print, self.found)
        self.finished = True


# This export's setting, in the process that reads trials (set before the workers start:
# forked, they share it; spawned, the initializer sets it).
_setting: _Setting | None = None


def _set_setting(setting: _Setting | None) -> None:
    global _setting
    _setting = setting


def _start_worker(setting: _Setting) -> None:
    # Ctrl-C reaches the whole process group: the parent handles it and ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_setting(setting)


class WorkerDied(PtbError):
    """A worker process ended without answering (killed, out of memory, a crash)."""

    exit_code = 1  # not the user's input: the machine's


def _prepare(job: _Job) -> _Outcome:
    """Read one trial into the rows that store it, or stage its run directory (in a
    worker process)."""
    setting = _setting
    assert setting is not None, "_set_setting first"
    where = job.trial_dir
    try:
        root = open_trial(where)
    except TrialReadError as exc:
        return _Outcome("skipped", where, message=str(exc))
    # One open of the trial for reading and copying: the directories reached while reading
    # (agent/, artifacts/...) are not walked again.
    with root:
        text, known = job.text, job.known
        if text is None:  # the walk found the trial by its trial.log
            try:
                text = read_harbor_file(root, RESULT_FILE)  # a link or FIFO is refused
            except FileNotFoundError:
                text = None
            except (OSError, UnicodeDecodeError):
                text = ""
            if text is not None and not is_trial_result(text):
                return _Outcome(
                    "skipped",
                    where,
                    message=f"{RESULT_FILE} is unreadable or not a trial result (half-written?)",
                )
            run_id = _run_id(text) if text else None
            known = setting.known.get(run_id) if run_id else None
        if text is None:
            return _Outcome("in_progress", where)
        try:
            source = read_trial_at(root, where, text)
        except TrialInProgress:
            return _Outcome("in_progress", where)
        except TrialReadError as exc:
            return _Outcome("skipped", where, message=str(exc))
        if known == source.record.fingerprint:
            return _Outcome("unchanged", where, source.record.id)
        try:
            if setting.with_final_model:
                staging = setting.staging / f"{job.seq}-{source.record.id}"
                record, warnings = _stage_dir(staging, source, root, where)
                run = stored_run(record, {}, str(staging))
            else:
                sink = MemorySink()
                record, warnings = stage_run_files(sink, source, root, where)
                run = stored_run(record, sink.files)
        except OSError as exc:
            return _Outcome(
                "skipped", where, message=f"cannot copy its files ({exc.strerror or exc})"
            )
    return _Outcome(
        "staged",
        where,
        record.id,
        record.fingerprint,
        warnings=tuple(warnings),
        run=run,
        cloud=is_cloud_trial(where),
    )


def _prepare_all(jobs: list[_Job]) -> list[_Outcome]:
    """`_prepare` each job of a chunk (a worker's task)."""
    return [_prepare(job) for job in jobs]


def _stage_dir(
    staged: Path, source: TrialSource, root: SafeDir, trial_dir: str
) -> tuple[ResultRecord, list[str]]:
    """Write the run, final_model included, into the new staging directory *staged*
    (removed again when that fails)."""
    try:
        staged.mkdir()
    except FileExistsError:  # left by a killed export (recover() normally clears staging)
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir()
    try:
        with DirSink(staged) as sink:
            record, warnings = stage_run_files(sink, source, root, trial_dir, with_final_model=True)
        record.write(staged)  # the model's directory says what it is, read by hand
    except OSError:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return record, warnings


def export(
    job_dirs: list[Path],
    results_dir: Path,
    *,
    with_final_model: bool = False,
    workers: int | None = None,
    keep_volumes: bool = False,
    progress: Callable[[int, int, bool], None] | None = None,
) -> ExportSummary:
    """Export every finished trial under *job_dirs* into the store at *results_dir*.

    A cloud trial's final_model volume is removed once its run is stored, unless
    *keep_volumes* (with *with_final_model*, only after its model was copied).
    *progress* is called with (trials done, trials found so far, whether the search of the
    job directories has ended) as the export goes.
    """
    missing = [str(d) for d in job_dirs if not Path(d).is_dir()]
    if missing:
        raise PtbError(f"not a directory: {', '.join(missing)}")
    if workers is not None and workers < 1:
        raise PtbError(f"invalid --workers {workers}: must be 1 or more")
    store = ResultsStore.open(results_dir, create=True)
    summary = ExportSummary(results_dir=str(store.root))
    with store.locked():
        walk = _Walk([Path(d) for d in job_dirs], store.prints())
        store.close()  # reopened by the first commit: no connection is forked into a worker
        # the fingerprints as stored before this export (the parent updates walk.known)
        setting = _Setting(dict(walk.known), store.staging, with_final_model)
        # (trial dir, run id) of every cloud trial stored now, and of every unchanged trial
        stored: list[tuple[Path | str, str]] = []
        owners: dict[str, str] = {}  # run id -> the trial dir whose outcome holds it
        store.staging.mkdir(exist_ok=True)
        done = 0
        try:
            for chunk in _outcome_chunks(walk, setting, workers or os.cpu_count() or 1):
                ready: list[_Outcome] = []
                for outcome in chunk:
                    first = _first_with_id(outcome, walk.first_of, owners)
                    if first is not None:
                        # A copy of a trial (same Harbor id) the walk could not tell before
                        # it was read: one run in the store, never two.
                        summary.skipped.append(
                            f"{outcome.trial_dir}: the same trial (id {outcome.run_id}) as {first}"
                        )
                    elif outcome.kind == "staged":
                        ready.append(outcome)
                    else:
                        _tally(outcome, summary)
                        if outcome.kind == "unchanged" and outcome.run_id:
                            stored.append((outcome.trial_dir, outcome.run_id))
                committed = _commit(store, ready, walk.known, summary)
                stored += [(o.trial_dir, o.run_id) for o in committed if o.cloud]
                done += len(chunk)
                if progress is not None:
                    progress(done + len(walk.unchanged), walk.found, walk.finished)
        finally:
            store.close()
        if progress is not None:
            progress(done + len(walk.unchanged), walk.found, True)
        summary.unchanged += len(walk.unchanged)
        summary.skipped[:0] = walk.skipped
        summary.agent_checks = walk.checks
        stored.extend(walk.unchanged)
        store.recover()  # drops the (now empty) staging directory
        removed, warnings = release_volumes(
            [
                (Path(trial), store.runs / run_id)
                for trial, run_id in stored
                if is_cloud_trial(trial)
            ],
            keep=keep_volumes,
            with_final_model=with_final_model,
        )
        summary.volumes_removed.extend(removed)
        summary.warnings.extend(warnings)
    return summary


def _pool_context() -> multiprocessing.context.BaseContext:
    """fork when this process runs no other thread (no lock can be held mid-fork, and the
    workers start at once with everything imported); spawn otherwise (a library's thread
    holding a lock at fork time could deadlock the child). Start-up: ~0 s vs ~1 s a worker."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _outcome_chunks(walk: _Walk, setting: _Setting, workers: int) -> Iterator[list[_Outcome]]:
    """The outcomes of the walk's jobs, a chunk at a time (the parent commits each in one
    transaction), in the walk's order."""
    jobs = walk.jobs()
    head = list(itertools.islice(jobs, POOL_THRESHOLD))
    jobs = itertools.chain(head, jobs)
    if workers == 1 or len(head) < POOL_THRESHOLD:
        _set_setting(setting)
        try:
            for job in jobs:  # each committed before the next is read: an interrupt loses none
                yield [_prepare(job)]
        finally:
            _set_setting(None)
        return
    # The workers read trials while the walk is still finding more (it runs as they ask),
    # at most _AHEAD chunks per worker ahead of the parent's commits.
    pool = ProcessPoolExecutor(
        workers, mp_context=_pool_context(), initializer=_start_worker, initargs=(setting,)
    )
    pending: deque[Future[list[_Outcome]]] = deque()
    try:
        for chunk in _chunks(jobs):
            pending.append(pool.submit(_prepare_all, chunk))
            if len(pending) > _AHEAD * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise WorkerDied(
            "a worker process ended without answering: killed, out of memory, or a crash"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _chunks(jobs: Iterator[_Job]) -> Iterator[list[_Job]]:
    while chunk := list(itertools.islice(jobs, _CHUNK)):
        yield chunk


def _first_with_id(
    outcome: _Outcome, first_of: dict[str, str], owners: dict[str, str]
) -> str | None:
    """The trial dir that holds *outcome*'s run id when it is not this one (a copy of that
    trial), else None; the first outcome with an id claims it."""
    if outcome.kind not in ("staged", "unchanged") or not outcome.run_id:
        return None
    first = first_of.get(outcome.run_id)
    if first is None or first == outcome.trial_dir:
        first = owners.setdefault(outcome.run_id, outcome.trial_dir)
    return first if first != outcome.trial_dir else None


def _tally(outcome: _Outcome, summary: ExportSummary) -> None:
    """Count an outcome that stores nothing."""
    if outcome.kind == "unchanged":
        summary.unchanged += 1
    elif outcome.kind == "in_progress":
        summary.in_progress.append(outcome.trial_dir)
    elif outcome.kind == "skipped":
        summary.skipped.append(f"{outcome.trial_dir}: {outcome.message}")


def _commit(
    store: ResultsStore, ready: list[_Outcome], known: dict[str, str], summary: ExportSummary
) -> list[_Outcome]:
    """Store a chunk's runs in one transaction and tally them; the outcomes stored. When
    the write fails (a full disk), each of them is reported skipped and nothing of them
    is stored: the next export adds them."""
    if not ready:
        return []
    try:
        store.commit([o.run for o in ready if o.run is not None])
    except (OSError, sqlite3.Error) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        summary.skipped += [f"{o.trial_dir}: cannot store it ({why})" for o in ready]
        return []
    for outcome in ready:
        summary.warnings.extend(outcome.warnings)
        previous = known.get(outcome.run_id)
        known[outcome.run_id] = outcome.fingerprint
        (summary.updated if previous is not None else summary.added).append(outcome.trial_dir)
    return ready
