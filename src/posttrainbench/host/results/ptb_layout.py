"""PostTrainBench's results layout: the one contract `ptb_export` writes and `ptb_import` reads.

PostTrainBench's HTCondor runs (its ``src/run_task.sh``) and its Harbor adapter's
``harbor_to_results.py`` write one directory per run::

    <results>/<method>/<benchmark>_<org>_<model>_<run id>/
        metrics.json                     {"accuracy": ..., "stderr": ...} (absent: no score)
        contamination_judgement.txt      "contamination detected" | "no contamination detected"
        disallowed_model_judgement.txt   "disallowed use detected" | "only allowed use detected"
        judge_result.json                the judges aggregated (branch new_judge_v2)
        time_taken.txt                   the agent's wall time, H:MM:SS
        solve_out.txt, solve_parsed.txt  the agent's trace, raw and readable
        final_model/                     the model (only when stored)

``<method>`` is ``<agent>_<agent config>_<hours>h[_<N>gpu][<experiment>]`` with ``/ : [ ]``
of the config replaced by ``_``; ``<org>_<model>`` is the base model's Hugging Face id with
``/`` replaced by ``_``. Its ``scripts/collect.py`` (branch qol_multigpu, pinned under
tests/fixtures/posttrainbench/scripts/) splits a run dir's name on ``_`` into exactly four
parts, takes the run with the highest run id per (benchmark, model), and replaces its score by
the base model's zero-shot score in ``baselines.json`` where the score is not a number or
either judgement file is missing or not clean.

Our judges map onto PostTrainBench's two verdicts: contamination and benchmark lookup onto
its contamination judgement, every other judge (disallowed model, API use, anomaly, the
isolation audit) onto its disallowed-use judgement. A verdict is clean only when each of its
judges cleared the run, so a run is clean in PostTrainBench's sense exactly when
`is_clean` says so, and the `ptb` leaderboard policy uses the same function.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, field_validator

from posttrainbench.host.catalog import list_models
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.selection import start_order

METRICS_FILE = "metrics.json"
CONTAMINATION_FILE = "contamination_judgement.txt"
DISALLOWED_FILE = "disallowed_model_judgement.txt"
JUDGE_RESULT_FILE = "judge_result.json"
TIME_TAKEN_FILE = "time_taken.txt"
SOLVE_OUT_FILE = "solve_out.txt"
SOLVE_PARSED_FILE = "solve_parsed.txt"
FINAL_MODEL_DIR = "final_model"

# The texts its judges write and its utils.py (load_contamination / load_disallowed_model)
# recognise: {flagged: text}.
CONTAMINATION_TEXT = {True: "contamination detected", False: "no contamination detected"}
DISALLOWED_TEXT = {True: "disallowed use detected", False: "only allowed use detected"}

# Its collect.py leaves these method dirs out (baselines come from baselines.json).
SKIP_METHODS = frozenset({"baseline", "baseline_zeroshot"})

# Our judges behind its contamination verdict; every other verdict is behind disallowed use.
CONTAMINATION_JUDGES = frozenset({"contamination", "benchmark_lookup"})

# An imported run's job name: "<prefix><method>", so it goes back out under its own method.
IMPORTED_JOB_PREFIX = "posttrainbench-results:"

_UNSAFE = re.compile(r"[/:\[\]]")
_BUDGET = re.compile(r"_(?P<hours>\d+(?:\.\d+)?)h(?:_(?P<gpus>\d+)gpu)?(?=_|$)")
_HMS = re.compile(r"^(\d+):(\d{1,2}):(\d{1,2})$")


class LayoutError(ValueError):
    """A name or file that PostTrainBench's layout cannot hold (or that is not its layout)."""


def safe_name(value: str) -> str:
    """`tr '/:[]' '____'`, as its run_task.sh makes names safe for a path."""
    return _UNSAFE.sub("_", value)


def format_hours(hours: float) -> str:
    """`10`, `0.5`: the hours as its run_task.sh writes NUM_HOURS."""
    return f"{hours:g}"


def method_name(agent: str, agent_model: str | None, hours: float | None, gpus: int) -> str:
    """`<agent>_<agent config>_<hours>h[_<N>gpu]`, as its run_task.sh builds EVAL_DIR's method.

    The agent config is the agent's model (empty when it has none, as an empty AGENT_CONFIG
    gives `<agent>__<hours>h` there); more than one GPU adds `_<N>gpu`."""
    if hours is None:
        raise LayoutError("no time budget to name its method by (<agent>_<model>_<hours>h)")
    suffix = f"_{gpus}gpu" if gpus > 1 else ""
    name = f"{safe_name(agent)}_{safe_name(agent_model or '')}_{format_hours(hours)}h{suffix}"
    if name in SKIP_METHODS:
        raise LayoutError(f"method {name!r} is a name its collect.py skips")
    return name


class MethodBudget(NamedTuple):
    """The time budget and GPU count a method's name states."""

    hours: float
    gpus: int


def method_budget(method: str) -> MethodBudget | None:
    """The `_<hours>h[_<N>gpu]` part of a method's name (the first one), or None."""
    found = _BUDGET.search(method)
    if found is None:
        return None
    return MethodBudget(float(found["hours"]), int(found["gpus"] or 1))


class RunDirName(NamedTuple):
    """`<benchmark>_<org>_<model>_<run id>`: a run directory's name."""

    benchmark: str
    org: str
    model: str
    run_id: int

    @classmethod
    def parse(cls, name: str) -> RunDirName:
        """As its utils.py walk_latest_runs reads it: four parts split on `_`, an int run id."""
        parts = name.split("_")
        if len(parts) != 4:
            raise LayoutError(
                f"not <benchmark>_<org>_<model>_<run id> (split on '_' gives {len(parts)} parts)"
            )
        benchmark, org, model, run_id = parts
        try:
            number = int(run_id)
        except ValueError:
            raise LayoutError(f"run id {run_id!r} is not an integer") from None
        if number < 0 or not (benchmark and org and model):
            raise LayoutError("empty part or negative run id")
        return cls(benchmark, org, model, number)

    @classmethod
    def of(cls, benchmark: str, hf_id: str, run_id: int) -> RunDirName:
        """The run dir of *hf_id* (`org/model`) on *benchmark*; LayoutError where an `_` or a
        missing org would make its four-part split read another name (its collect.py would
        stop with an error on such a directory)."""
        org, slash, model = hf_id.partition("/")
        if not slash or "/" in model or not org or not model:
            raise LayoutError(f"model {hf_id!r} is not <org>/<name>")
        org, model = safe_name(org), safe_name(model)
        if "_" in benchmark:
            raise LayoutError(
                f"benchmark {benchmark!r} has an '_', which the four-part split misreads"
            )
        if "_" in org + model:
            raise LayoutError(
                f"model {hf_id!r} has an '_' (or ':', '[', ']') in its org or name, "
                "which the four-part split misreads"
            )
        return cls(benchmark, org, model, run_id)

    def __str__(self) -> str:
        return f"{self.benchmark}_{self.org}_{self.model}_{self.run_id}"

    @property
    def hf_id(self) -> str:
        """`org/model`."""
        return f"{self.org}/{self.model}"


class PtbMetrics(BaseModel):
    """`metrics.json`: the score its evaluation wrote; `accuracy` is what collect.py reads."""

    model_config = ConfigDict(extra="allow")

    accuracy: float
    stderr: float | None = None

    @field_validator("accuracy")
    @classmethod
    def _a_number(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("accuracy is not a finite number")
        return value


class JudgeResult(BaseModel):
    """`judge_result.json`: its judges aggregated (src/disallowed_usage_judge/
    aggregate_judgement.py, branch new_judge_v2; either contamination judge flags -> flagged,
    the API judge kept apart)."""

    model_config = ConfigDict(extra="allow")

    contamination: bool
    disallowed_model: bool
    justification_contamination: str = ""
    justification_disallowed_model: str = ""
    disallowed_api_usage: bool | None = None
    justification_disallowed_api_usage: str | None = None


def hf_id_of(base_model: str) -> str | None:
    """The Hugging Face id PostTrainBench names a catalog base model by, or None."""
    for spec in list_models():
        if spec.id == base_model:
            return spec.model_id
    return None


def catalog_model_of(hf_id: str) -> str | None:
    """The catalog base model whose Hugging Face id is *hf_id*, or None."""
    for spec in list_models():
        if spec.model_id == hf_id:
            return spec.id
    return None


def _side(record: ResultRecord, contamination: bool) -> bool | None:
    verdicts = [v for v in record.verdicts if (v.judge in CONTAMINATION_JUDGES) == contamination]
    if any(v.flagged for v in verdicts):
        return True
    if record.flagged is False:
        return False
    # Cleared by every judge of this side that the record has: clean here, though the other
    # side may be undecided.
    if verdicts and all(v.flagged is False for v in verdicts):
        return False
    return None


def judgement_flags(record: ResultRecord) -> tuple[bool | None, bool | None]:
    """(contamination, disallowed use) as PostTrainBench's two verdicts: True flagged, False
    clean, None undecided (its collect.py reads a missing file as an error, never clean)."""
    return _side(record, True), _side(record, False)


def is_clean(record: ResultRecord) -> bool:
    """Whether both verdicts are clean: PostTrainBench scores the run only then."""
    return judgement_flags(record) == (False, False)


def imported_origin(record: ResultRecord) -> tuple[str, RunDirName] | None:
    """The method and run dir an imported run came from, or None for a run of ours."""
    if not record.job_name.startswith(IMPORTED_JOB_PREFIX):
        return None
    try:
        return record.job_name.removeprefix(IMPORTED_JOB_PREFIX), RunDirName.parse(
            record.trial_name
        )
    except LayoutError:
        return None


def record_method(record: ResultRecord) -> str:
    """The method dir a run goes into: its own for an imported run, else built from it."""
    origin = imported_origin(record)
    if origin is not None:
        return origin[0]
    return method_name(record.agent, record.agent_model, record.hours, record.usage.gpus)


def run_ids(runs: Iterable[ResultRecord]) -> dict[str, int]:
    """Run ids for one cell's runs, increasing in start order (so its "latest run" is ours).

    An imported run keeps its own; a run of ours gets its start time in Unix seconds, as
    harbor_to_results.py does, raised past the previous run's where two share a second."""
    ids: dict[str, int] = {}
    previous = -1
    for record in sorted(runs, key=start_order):
        origin = imported_origin(record)
        if origin is not None:
            number = origin[1].run_id
        else:
            started = record.time.started_at
            number = max(int(started.timestamp()) if started else 0, previous + 1)
        ids[record.id] = number
        previous = max(previous, number)
    return ids


def format_hms(seconds: int) -> str:
    """`H:MM:SS`, as its run_task.sh writes time_taken.txt."""
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def parse_hms(text: str) -> int | None:
    """Seconds of an `H:M:S` time_taken.txt (its utils.py parse_time_hms), or None."""
    found = _HMS.match(text.strip())
    if not found:
        return None
    hours, minutes, seconds = map(int, found.groups())
    if minutes >= 60 or seconds >= 60:
        return None
    return hours * 3600 + minutes * 60 + seconds


def imported_run_id(method: str, run_dir: RunDirName) -> str:
    """A stable record id for an imported run dir: the same dir imports as the same run, and
    a cell's runs sort by their run id (they have no start time to sort by)."""
    cell = f"{method}/{run_dir.benchmark}_{run_dir.org}_{run_dir.model}"
    digest = hashlib.sha256(cell.encode()).hexdigest()[:16]
    return f"ptb-{digest}-{run_dir.run_id:020d}"
