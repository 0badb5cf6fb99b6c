"""Read one Harbor trial directory into a `ResultRecord` (and the files worth keeping).

Harbor writes `result.json` (its `TrialResult`) when a trial starts and again when it
ends; only a trial with `finished_at` is exported. The verifier writes `metrics.json`,
`task.json` and the judges' `judgement_<id>.json` into `verifier/`; `ptb judge` run
later on the host writes newer verdicts into `judges/`, which win per judge.

The agent could write below `agent/`, `artifacts/` and `verifier/`, so everything is read
through `safe_fs`: no link is followed, special files, hard links and sparse files are
refused, and each refusal is kept in the record with its reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from posttrainbench.core.nofollow import Refused, kind_of
from posttrainbench.core.safe_fs import FileRead, SafeDir
from posttrainbench.core.trial_outcome import TrialOutcome, classify
from posttrainbench.core.verdict import JUDGE_IDS, VERDICT_IDS, Judgement
from posttrainbench.host.results.harbor_result import HarborResult
from posttrainbench.host.results.record import ResultRecord, TimeUsed, Usage, combine_flags
from posttrainbench.host.results.rescore_origin import REPLAY_AGENT_NAME, origin_of
from posttrainbench.host.tasks.task_version import TASK_VERSION_FILE, TaskVersion
from posttrainbench.task.integrity.agentic.verdicts import STATUS_FILE as AGENTIC_STATUS_FILE
from posttrainbench.task.integrity.agentic.verdicts import AgenticStatus
from posttrainbench.task.integrity.traces.trial_files import (
    MAX_TRACE_BYTES,
    TraceScan,
    artifacts_subdir,
    plain_agent_log,
    scan_trial_traces,
)
from posttrainbench.task.schemas import Metrics, TaskSpec

RESULT_FILE = "result.json"
CONFIG_FILE = "config.json"
JUDGE_DIRS = ("verifier", "judges")  # later wins
MAX_JSON_BYTES = 64 * 2**20  # result, metrics, task spec or verdict: far larger is not one
# Part of every fingerprint: bump it when what an export reads or derives changes, so that
# runs an older exporter stored are exported again (safe-1: no link followed; outcome-1:
# the trial_outcome kinds).
READER_VERSION = "outcome-1"


_M = TypeVar("_M", bound=BaseModel)


class TrialReadError(Exception):
    """A trial directory whose result cannot be used (malformed, half-written)."""


class TrialInProgress(Exception):
    """A trial that has not finished yet: exported by a later run."""


@dataclass
class TrialSource:
    """A readable finished trial: its record and the files to copy with it (paths relative to
    the trial directory; what was refused is in `record.refused_files`)."""

    record: ResultRecord
    traces: list[str] = field(default_factory=list)
    snapshot: str | None = None
    final_model: str | None = None
    trace_reads: dict[str, FileRead] = field(default_factory=dict)  # read whole by the scan
    agent_log: str | None = None  # without a trace: the agent's plain log, to keep its head
    samples: str | None = None  # the verifier's per-question results, when it wrote them


def is_trial_result(text: str) -> bool:
    """Whether a `result.json` text is a trial's (a job's has no trial_name)."""
    return '"trial_name"' in text


def trial_id(text: str) -> str | None:
    """Harbor's trial id from a result.json text, without validating the rest."""
    try:
        value = json.loads(text).get("id")
    except (ValueError, AttributeError):
        return None
    return str(value) if value else None


# The verifier's files a reader lstats: those the fingerprint covers and those `_read` opens.
_VERIFIER_NAMES = frozenset({"metrics.json", "task.json", TASK_VERSION_FILE, AGENTIC_STATUS_FILE})


def _listed(name: str) -> bool:
    return name in _VERIFIER_NAMES or name.startswith("judgement_")


def _printed(name: str) -> bool:
    return name in ("metrics.json", AGENTIC_STATUS_FILE) or name.startswith("judgement_")


# (name, lstat) of the files of interest in each of JUDGE_DIRS, sorted by name
Listings = dict[str, list[tuple[str, os.stat_result]]]


def fingerprint_at(root: SafeDir) -> tuple[str, Listings]:
    """Changes when result.json, metrics.json or any verdict file changes (kind, size and
    mtime); with the listings it was taken from, whose lstats spare the reads taking them
    again. Neither the directories nor the files are reached through a link."""
    listings: Listings = {}
    for sub in JUDGE_DIRS:
        try:
            listings[sub] = root.entries(sub, _listed)
        except (OSError, Refused):  # no such directory, or not a real one (a link, a file)
            continue
    return _print_of(root.lstat(RESULT_FILE), listings), listings


def fingerprint(trial_dir: Path | str) -> str:
    """`fingerprint_at`, by the trial directory's path, for a walk deciding whether a stored
    trial changed without opening it: some 40% fewer system calls. It would follow a
    verdict directory swapped for a link, which only makes the two prints differ: the trial
    is then read again, by `fingerprint_at`, which never follows one."""
    try:
        result = os.stat(os.path.join(trial_dir, RESULT_FILE), follow_symlinks=False)
    except OSError:
        result = None
    listings: Listings = {}
    for sub in JUDGE_DIRS:
        try:
            with os.scandir(os.path.join(trial_dir, sub)) as found:
                listings[sub] = sorted(
                    ((e.name, e.stat(follow_symlinks=False)) for e in found if _printed(e.name)),
                    key=lambda entry: entry[0],
                )
        except OSError:
            continue
    return _print_of(result, listings)


def _print_of(result: os.stat_result | None, listings: Listings) -> str:
    parts = [READER_VERSION]
    if result is not None:
        parts.append(f"/{RESULT_FILE}:{result.st_mode:o}:{result.st_size}:{result.st_mtime_ns}")
    for sub in JUDGE_DIRS:
        parts.extend(
            f"{sub}/{name}:{st.st_mode:o}:{st.st_size}:{st.st_mtime_ns}"
            for name, st in listings.get(sub, ())
            if _printed(name)
        )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def read_trial(trial_dir: Path, text: str | None = None, *, resolved: bool = False) -> TrialSource:
    """Read a finished trial; TrialInProgress or TrialReadError otherwise.

    *resolved*: *trial_dir* is already canonical (the export's walk makes it so), which
    spares a path resolution per trial.
    """
    trial_dir = Path(trial_dir) if resolved else Path(trial_dir).resolve()
    with open_trial(trial_dir) as root:
        return read_trial_at(root, trial_dir, text)


def open_trial(trial_dir: Path | str) -> SafeDir:
    """The trial directory as a SafeDir; TrialReadError when it cannot be opened."""
    try:
        return SafeDir.open(trial_dir)
    except OSError as exc:
        raise TrialReadError(f"cannot open the trial directory: {exc.strerror or exc}") from None


def read_harbor_file(root: SafeDir, name: str) -> str:
    """A file Harbor wrote at the trial's top level (the agent cannot write there, so a hard
    link to it is someone's backup, not an attack; a link or special file is still refused)."""
    return root.read_bytes(name, MAX_JSON_BYTES, hard_links_ok=True).decode("utf-8")


def read_outcome(trial_dir: Path) -> TrialOutcome:
    """What became of a trial (an unfinished one is an infra_error: it never finished), read
    through the same guards as `read_trial`; TrialReadError when it cannot be read."""
    with open_trial(Path(trial_dir)) as root:
        return classify(_result(root, None), _metrics(root, _verifier_lstat(root, "metrics.json")))


def _result(root: SafeDir, text: str | None) -> HarborResult:
    """Harbor's result.json (*text* when the caller has read it already)."""
    try:
        text = text if text is not None else read_harbor_file(root, RESULT_FILE)
        return HarborResult.model_validate_json(text)
    except UnicodeDecodeError:
        raise TrialReadError(f"{RESULT_FILE} is not UTF-8 text") from None
    except OSError as exc:
        raise TrialReadError(f"cannot read {RESULT_FILE}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        lines = str(exc).splitlines()
        raise TrialReadError(
            f"{RESULT_FILE} is not a Harbor trial result ({' '.join(lines[:3])})"
        ) from None


def read_trial_at(root: SafeDir, trial_dir: Path | str, text: str | None = None) -> TrialSource:
    """`read_trial` of a trial directory already open as *root* (*trial_dir*: its canonical
    path, a string from an export's walk); the caller may go on using *root*, say to copy
    the trial's files."""
    # Taken before any verdict or metrics file is read: a file rewritten meanwhile (`ptb
    # judge` running during an export) then changes the fingerprint, and the next export
    # reads the run again instead of keeping what was read before the change.
    printed, listings = fingerprint_at(root)
    verifier = dict(listings.get("verifier", ()))
    result = _result(root, text)
    if result.finished_at is None:
        raise TrialInProgress(result.trial_name)
    refused: list[str] = []
    spec = _task_spec(root, result, verifier.get("task.json"), refused)
    version = _task_version(root, verifier.get(TASK_VERSION_FILE), refused)
    metrics = _metrics(root, verifier.get("metrics.json"))
    benchmark, base_model = _benchmark_and_model(result.task_name, spec, metrics)
    verdicts = _verdicts(root, listings, refused)
    ptb_judges = _ptb_judges(root, verifier.get(AGENTIC_STATUS_FILE), refused)
    outcome = classify(result, metrics)
    score = None
    if outcome.kind == "completed":  # the verifier's accuracy, else the bare reward
        score = metrics.accuracy if metrics is not None else outcome.reward
    scan = scan_trial_traces(root)
    refused += scan.refused
    artifacts = artifacts_subdir(root)
    snapshot = _artifact_dir(root, f"{artifacts}/code_snapshot", refused)
    final_model = _artifact_dir(root, f"{artifacts}/final_model", refused)
    model_info = result.agent_info.model_info
    record = ResultRecord(
        id=str(result.id),
        job_name=os.path.basename(os.path.dirname(trial_dir)),
        trial_name=result.trial_name,
        task_name=result.task_name,
        agent=result.agent_info.name,
        agent_version=result.agent_info.version,
        agent_model=_model_name(model_info) if model_info else result.config.agent.model_name,
        benchmark=benchmark,
        base_model=base_model,
        hours=spec.hours if spec else None,
        feedback=spec.feedback if spec else None,
        task_spec=spec,
        task_version=version.version if version else None,
        task_inputs=version.inputs if version else {},
        task_compiled_at=version.compiled_at if version else None,
        status=outcome.kind,
        error=None if outcome.kind == "completed" else outcome.reason,
        score=score,
        reward=outcome.reward,
        metrics=metrics,
        verdicts=verdicts,
        ptb_judges=ptb_judges,
        # An audit verdict flags a run but never stands in for a judge that cleared it.
        flagged=combine_flags(
            [v for v in verdicts if v.judge in JUDGE_IDS or v.flagged], len(JUDGE_IDS)
        ),
        usage=_usage(result, root, scan, spec),
        time=_time(result, spec),
        source_dir=str(trial_dir),
        fingerprint=printed,
        exported_at=datetime.now(UTC),
        refused_files=refused,
    )
    if result.agent_info.name == REPLAY_AGENT_NAME:
        origin = origin_of(result.config.agent.kwargs)
        if origin is None:
            raise TrialReadError("a re-score trial (ptb rescore) whose config names no origin run")
        record = origin.apply(record)
    return TrialSource(
        record=record,
        traces=scan.files,
        snapshot=snapshot,
        final_model=final_model,
        trace_reads=scan.reads,
        agent_log=None if scan.files else plain_agent_log(root),
        samples=VERIFIER_SAMPLES if _regular(root.lstat(VERIFIER_SAMPLES)) else None,
    )


VERIFIER_SAMPLES = "verifier/samples.jsonl"


def _regular(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISREG(st.st_mode)


def _artifact_dir(root: SafeDir, relative: str, refused: list[str]) -> str | None:
    """*relative* when it is a real directory; a link or file in its place is refused."""
    found = root.lstat(relative)
    if found is None:
        return None
    if stat.S_ISDIR(found.st_mode):
        return relative
    refused.append(f"{relative}: {kind_of(found.st_mode)}")
    return None


def _model_name(info) -> str:
    return f"{info.provider}/{info.name}" if info.provider and "/" not in info.name else info.name


def _verifier_lstat(root: SafeDir, name: str) -> os.stat_result | None:
    return root.lstat(f"verifier/{name}")


def _task_spec(
    root: SafeDir, result: HarborResult, found: os.stat_result | None, refused: list[str]
) -> TaskSpec | None:
    """The verifier's copy of the task spec (*found*: its lstat, None when it is not
    there), else the task directory's, if either is there."""
    if found is not None:
        try:
            return TaskSpec.model_validate_json(
                root.read_bytes("verifier/task.json", MAX_JSON_BYTES, lstat=found)
            )
        except Refused as exc:
            refused.append(str(exc))
        except (OSError, ValueError):
            pass
    task_path = result.config.task.path
    if task_path is not None:  # the compiled task: written on the host, before the agent ran
        path = Path(task_path) / "tests" / "task.json"
        if path.is_file():
            try:
                return TaskSpec.load(path)
            except (OSError, ValueError):
                pass
    return None


def _task_version(
    root: SafeDir, found: os.stat_result | None, refused: list[str]
) -> TaskVersion | None:
    """The verifier's copy of the task's version (*found*: its lstat); None for a trial
    scored before tasks had one (or whose copy is unreadable: the run is then shown as
    unversioned)."""
    return _verifier_json(root, TASK_VERSION_FILE, TaskVersion, found, refused)


def _verifier_json(
    root: SafeDir, name: str, model: type[_M], found: os.stat_result | None, refused: list[str]
) -> _M | None:
    """A JSON file of `verifier/` (*found*: its lstat) as *model*; None when absent or
    unreadable, and a link or special file in its place refused."""
    if found is None:
        return None
    try:
        return model.model_validate_json(
            root.read_bytes(f"verifier/{name}", MAX_JSON_BYTES, lstat=found)
        )
    except Refused as exc:
        refused.append(str(exc))
    except (OSError, ValueError):
        pass
    return None


def _metrics(root: SafeDir, found: os.stat_result | None) -> Metrics | None:
    """The verifier's metrics (*found*: the lstat of metrics.json, None when it is not there)."""
    name = "verifier/metrics.json"
    if found is None:
        return None
    try:
        return Metrics.model_validate_json(root.read_bytes(name, MAX_JSON_BYTES, lstat=found))
    except Refused as exc:
        raise TrialReadError(f"refused to read {exc}") from None
    except OSError as exc:
        raise TrialReadError(f"cannot read {name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TrialReadError(f"{name} is not valid: {str(exc).splitlines()[0]}") from None


def _benchmark_and_model(
    task_name: str, spec: TaskSpec | None, metrics: Metrics | None
) -> tuple[str, str]:
    """From the task spec; else from the task name `posttrainbench/<benchmark>-<model>`
    (benchmark ids have no dash, so the first dash splits it)."""
    if spec is not None:
        return spec.benchmark, spec.model
    short = task_name.rsplit("/", 1)[-1]
    benchmark, sep, model = short.partition("-")
    if not sep or not model:
        raise TrialReadError(
            f"task {task_name!r} is not a PostTrainBench task (no task.json, name not "
            "'<benchmark>-<model>')"
        )
    if metrics is not None and metrics.benchmark not in ("unknown", benchmark):
        raise TrialReadError(
            f"task {task_name!r} disagrees with its metrics.json benchmark {metrics.benchmark!r}"
        )
    return benchmark, model


def _ptb_judges(
    root: SafeDir, st: os.stat_result | None, refused: list[str]
) -> AgenticStatus | None:
    """PostTrainBench's agentic judges' outcome (verifier/ptb_judges.json), if any."""
    return _verifier_json(root, AGENTIC_STATUS_FILE, AgenticStatus, st, refused)


def _verdicts(root: SafeDir, listings: Listings, refused: list[str]) -> list[Judgement]:
    """One verdict per judge, from the files *listings* found (with their lstats); an
    unreadable verdict file counts as no verdict."""
    found: dict[str, Judgement] = {}
    for sub in JUDGE_DIRS:  # later wins
        for name, st in listings.get(sub, ()):
            # `judgement_*.json` (the two ends cannot overlap), without fnmatch's regex
            if not (name.startswith("judgement_") and name.endswith(".json")):
                continue
            try:
                # straight from bytes: one parse, not json.loads and then a validation
                verdict = Judgement.model_validate_json(
                    root.read_bytes(f"{sub}/{name}", MAX_JSON_BYTES, lstat=st)
                )
            except Refused as exc:
                refused.append(str(exc))
                continue
            except (OSError, ValueError):
                continue
            found[verdict.judge] = verdict
    return [found[j] for j in VERDICT_IDS if j in found]


def _hours(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max((end - start).total_seconds(), 0.0) / 3600


def _time(result: HarborResult, spec: TaskSpec | None) -> TimeUsed:
    agent = result.agent_execution
    return TimeUsed(
        budget_hours=spec.hours if spec else None,
        agent_hours=_hours(agent.started_at, agent.finished_at) if agent else None,
        total_hours=_hours(result.started_at, result.finished_at),
        started_at=result.started_at,
        finished_at=result.finished_at,
    )


def _usage(result: HarborResult, root: SafeDir, scan: TraceScan, spec: TaskSpec | None) -> Usage:
    """Tokens and cost from Harbor's agent context, else summed from the best trace (as the
    scan read it, when it kept it: the file is not opened a second time)."""
    traces = scan.files
    gpus = spec.gpus if spec else _gpus_from_config(root)
    agent = result.agent_execution
    hours = _hours(agent.started_at, agent.finished_at) if agent else None
    gpu_hours = gpus * hours if hours else 0.0
    n_input, n_cache, n_output, cost = result.token_cost_totals()
    if any(v is not None for v in (n_input, n_output, cost)):
        return Usage(
            input_tokens=n_input,
            cache_tokens=n_cache,
            output_tokens=n_output,
            cost_usd=cost,
            source="harbor",
            gpus=gpus,
            gpu_hours=gpu_hours,
        )
    if traces:
        from posttrainbench.task.integrity.traces.load import parse_trace_text

        try:
            kept = scan.reads.get(traces[0])
            whole = kept.whole if kept is not None else None
            head = whole if whole is not None else root.read_head(traces[0], MAX_TRACE_BYTES)[0]
            usage = parse_trace_text(head.decode("utf-8", errors="replace"), source=traces[0]).usage
        except Exception:
            usage = None
        if usage is not None and (usage.input_tokens or usage.output_tokens or usage.cost_usd):
            cache = usage.cache_read_tokens + usage.cache_write_tokens
            return Usage(
                input_tokens=usage.input_tokens + cache,
                cache_tokens=cache,
                output_tokens=usage.output_tokens,
                cost_usd=usage.cost_usd,
                source="trace",
                gpus=gpus,
                gpu_hours=gpu_hours,
            )
    return Usage(gpus=gpus, gpu_hours=gpu_hours)


def _gpus_from_config(root: SafeDir) -> int:
    """The GPU count from the trial's environment config, when no task spec is left."""
    try:
        raw = json.loads(read_harbor_file(root, CONFIG_FILE))
        return int(raw.get("environment", {}).get("override_gpus") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0
