"""`ptb results export`: Harbor job and trial directories into a results store.

Incremental: the store's journal (`store_index`) maps each stored run to the trial
directory it came from and that trial's fingerprint (sizes and mtimes of its result and
verdict files), so a trial whose fingerprint is unchanged is skipped with a few stats,
before its result.json is even opened; one whose result or verdicts changed since (say
`ptb judge` ran again) is read and replaced. A trial still running is left for a later
export, and a malformed one is reported and skipped. Worker processes read trials while
the parent is still walking the job directories (which finds a trial by Harbor's
trial.log, without opening it), and append each run to a pack of their own (or stage its
run directory, with --with-final-model); only the parent commits runs, one journal line
each, and only one run per Harbor trial id.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
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
from posttrainbench.host.results.ordered_pool import ProcessContext, map_chunks
from posttrainbench.host.results.pack import BlobRef, PackWriter
from posttrainbench.host.results.record import RECORD_FILE, ResultRecord
from posttrainbench.host.results.run_files import PackSink, stage_run_files
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.results.store_index import (
    IndexEntry,
    Journal,
    compact_journal,
    load_index,
    record_stat,
)
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
# Trials a worker takes per message: at 8 the parent spent ~0.1 ms a trial more on pickling
# and pipes (measured on 5,000 trials); past 32 nothing more was saved.
_CHUNK = 32
# Lines a journal may carry beyond two per stored run before an export rewrites it.
_SLACK_LINES = 1_000
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
    packs: str
    with_final_model: bool


class _Outcome(NamedTuple):
    kind: Literal["staged", "unchanged", "in_progress", "skipped"]
    trial_dir: str
    run_id: str = ""
    fingerprint: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    staged: Path | None = None  # a staged run directory, or:
    packed: BlobRef | None = None  # the record of a run appended to a pack
    cloud: bool = False  # a cloud trial: its final_model volume is released once stored


class FoundTrial(NamedTuple):
    """A trial directory (its canonical path) and its result.json text, when the walk read
    it. None: not read, either *indexed* (the store's index entry, when the trial is stored
    and its fingerprint has not changed since) or left to the worker that reads the trial
    (Harbor's trial.log told the walk it is a trial).
    """

    path: str
    text: str | None
    indexed: IndexEntry | None = None


# Written by `ptb agents check` into its run dir (posttrainbench.host.agent_check.run).
AGENT_CHECK_MARKER = "ptb-agent-check"


def _classify(directory: str, by_dir: dict[str, IndexEntry] | None = None) -> FoundTrial | None:
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
    root: Path, by_dir: dict[str, IndexEntry] | None = None, checks: list[str] | None = None
) -> Iterator[FoundTrial]:
    """The trials under a jobs dir, a job dir, a ptb run dir or a trial dir, in path order.

    *root* is resolved once; below it only real directories are entered (never a link), so
    every path found is already canonical. *by_dir* (source dir -> index entry) lets a
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

    def __init__(self, roots: list[Path], index: dict[str, IndexEntry]):
        self.roots = roots
        self.known = {run_id: e.fingerprint for run_id, e in index.items()}
        self.by_dir = {e.source_dir: e for e in index.values()}
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


def _prepare(job: _Job) -> _Outcome:
    """Read one trial and pack its run, or stage its run directory (in a worker process)."""
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
                record, warnings, staged = _stage_dir(staging, source, root, where)
                packed = None
            else:
                record, warnings, packed = _pack(setting.packs, source, root, where)
                staged = None
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
        staged=staged,
        packed=packed,
        cloud=is_cloud_trial(where),
    )


def _pack(
    packs: str, source: TrialSource, root: SafeDir, trial_dir: str
) -> tuple[ResultRecord, list[str], BlobRef]:
    """Queue the run's files, then its record, for this process's pack (`_prepare_all`
    writes them); on a failure, what the run queued is forgotten."""
    writer = _pack_writer(packs)
    mark = writer.mark()
    try:
        record, warnings = stage_run_files(PackSink(writer), source, root, trial_dir)
        ref = writer.append(record.model_dump_json().encode())
    except BaseException:
        writer.drop(mark)
        raise
    return record, warnings, ref


def _prepare_all(jobs: list[_Job]) -> list[_Outcome]:
    """`_prepare` each job, then write their runs to the pack in one go: before the parent,
    which writes the journal lines naming them, sees any of their outcomes."""
    outcomes = [_prepare(job) for job in jobs]
    writer = _writers.get(_setting.packs) if _setting is not None else None
    if writer is not None:
        try:
            writer.flush()
        except OSError as exc:
            message = f"cannot copy its files ({exc.strerror or exc})"
            return [
                _Outcome("skipped", o.trial_dir, message=message) if o.packed else o
                for o in outcomes
            ]
    return outcomes


def _stage_dir(
    staged: Path, source: TrialSource, root: SafeDir, trial_dir: str
) -> tuple[ResultRecord, list[str], Path]:
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
        record.write(staged)
    except OSError:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return record, warnings, staged


# One pack writer per process and store (by the store's packs dir): a forked worker forgets
# its parent's, so two processes never append to one pack. Not keyed by pid: os.getpid()
# is a system call, twice a trial.
_writers: dict[str, PackWriter] = {}
os.register_at_fork(after_in_child=_writers.clear)


def _pack_writer(packs: str) -> PackWriter:
    writer = _writers.get(packs)
    if writer is None:
        writer = _writers[packs] = PackWriter(Path(packs))
    return writer


def _close_pack_writers() -> None:
    for writer in _writers.values():
        writer.close()
    _writers.clear()


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
        loaded = load_index(store.root, store.runs)
        index = loaded.entries
        run_dirs = loaded.run_dirs - set(loaded.stale_dirs)
        for run_id in loaded.stale_dirs:  # a replacement killed before it removed the dir
            shutil.rmtree(store.runs / run_id, ignore_errors=True)
        walk = _Walk([Path(d) for d in job_dirs], index)
        # the fingerprints as stored before this export (the parent updates walk.known)
        setting = _Setting(dict(walk.known), store.staging, str(store.packs), with_final_model)
        # (trial dir, run id) of every cloud trial stored now, and of every unchanged trial
        stored: list[tuple[Path | str, str]] = []
        owners: dict[str, str] = {}  # run id -> the trial dir whose outcome holds it
        store.staging.mkdir(exist_ok=True)
        store.packs.mkdir(exist_ok=True)
        journal = Journal(store.root)
        done = 0
        try:
            for carried in loaded.to_journal:  # run dirs the journal did not vouch for yet
                journal.append(carried)
            for outcome in _outcomes(walk, setting, workers or os.cpu_count() or 1):
                first = _first_with_id(outcome, walk.first_of, owners)
                if first is not None:
                    # A copy of a trial (same Harbor id) the walk could not tell before it
                    # was read: one run in the store, never two.
                    summary.skipped.append(
                        f"{outcome.trial_dir}: the same trial (id {outcome.run_id}) as {first}"
                    )
                else:
                    entry = _record(store, journal, outcome, walk.known, summary, run_dirs)
                    if entry is not None:
                        index[outcome.run_id] = entry
                    if (
                        outcome.kind == "staged" and outcome.cloud or outcome.kind == "unchanged"
                    ) and outcome.run_id:
                        stored.append((outcome.trial_dir, outcome.run_id))
                done += 1
                if progress is not None:
                    progress(done + len(walk.unchanged), walk.found, walk.finished)
        finally:
            _close_pack_writers()
            journal.close()
        if loaded.journal_lines + journal.lines_written > 2 * len(index) + _SLACK_LINES:
            compact_journal(store.root, index)  # replaced runs' lines only slow each load
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


def _pool_context() -> ProcessContext:
    """fork when this process runs no other thread (no lock can be held mid-fork, and the
    workers start at once with everything imported); spawn otherwise (a library's thread
    holding a lock at fork time could deadlock the child). Start-up: ~0 s vs ~1 s a worker."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _outcomes(walk: _Walk, setting: _Setting, workers: int) -> Iterator[_Outcome]:
    jobs = walk.jobs()
    head = list(itertools.islice(jobs, POOL_THRESHOLD))
    jobs = itertools.chain(head, jobs)
    if workers == 1 or len(head) < POOL_THRESHOLD:
        _set_setting(setting)
        try:
            for job in jobs:  # each committed before the next is read: an interrupt loses none
                yield from _prepare_all([job])
        finally:
            _set_setting(None)
        return
    # The workers read trials while the walk is still finding more (it runs as they ask).
    for outcomes in map_chunks(
        _prepare_all,
        _chunks(jobs),
        context=_pool_context(),
        workers=workers,
        initializer=_set_setting,
        initargs=(setting,),
    ):
        yield from outcomes


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


def _record(
    store: ResultsStore,
    journal: Journal,
    outcome: _Outcome,
    known: dict[str, str],
    summary: ExportSummary,
    run_dirs: set[str],
) -> IndexEntry | None:
    """Tally *outcome*; a staged run is committed: its index entry (None for the rest).
    *run_dirs*: the run ids stored as directories, kept up to date."""
    where = outcome.trial_dir
    if outcome.kind == "unchanged":
        summary.unchanged += 1
        return None
    if outcome.kind == "in_progress":
        summary.in_progress.append(where)
        return None
    if outcome.kind == "skipped":
        summary.skipped.append(f"{where}: {outcome.message}")
        return None
    stat_now = None
    if outcome.packed is None:
        target = store.commit(outcome.staged or store.staging / outcome.run_id, outcome.run_id)
        run_dirs.add(outcome.run_id)
        stat_now = record_stat(target / RECORD_FILE)
    summary.warnings.extend(outcome.warnings)
    previous = known.get(outcome.run_id)
    known[outcome.run_id] = outcome.fingerprint
    (summary.updated if previous is not None else summary.added).append(where)
    if outcome.packed is None and stat_now is None:
        return None  # already gone: the next export finds out by listing runs/
    entry = IndexEntry(
        run_id=outcome.run_id,
        source_dir=where,
        fingerprint=outcome.fingerprint,
        record=outcome.packed,
        record_stat=stat_now,
    )
    journal.append(entry)
    if outcome.packed is not None and outcome.run_id in run_dirs:
        # After the line: a run dir the journal now replaces (a crash in between leaves a
        # dir the next export removes, never a store without the run).
        shutil.rmtree(store.runs / outcome.run_id, ignore_errors=True)
        run_dirs.discard(outcome.run_id)
    return entry
