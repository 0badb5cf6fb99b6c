"""How much of the agent's time budget is left, read from the sandbox when possible.

PostTrainBench tasks start the agent's clock in the healthcheck (`/opt/ptb/start.sh`
writes epoch seconds to `/logs/agent/ptb_start_time`) and state the budget as `hours`
in `/opt/ptb/task.json`. Both are read inside the environment, with the environment's
own clock, so host/sandbox clock skew (Modal, Daytona) does not matter. Other tasks can
give a budget in minutes, measured from the wrapper's own start; without either the
time left is unknown.
"""

from __future__ import annotations

import json
import shlex
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.agents.templates import render

PTB_START_FILE = MODEL_LAYOUT.clock
PTB_TASK_FILE = MODEL_LAYOUT.task_file
_TASK_MARKER = "@@ptb-task-json@@"
PROBE_TIMEOUT_SEC = 30


class TimeSource(StrEnum):
    """Where a time-left figure came from."""

    PTB_TASK = "ptb-task"  # the task's clock stamp and task.json hours
    BUDGET_MINUTES = "budget-minutes"  # the wrapper's `budget_minutes`, from its own start
    UNKNOWN = "unknown"


class TimeLeft(BaseModel):
    """Seconds of budget left (negative once the deadline passed), or None if unknown."""

    model_config = ConfigDict(frozen=True)

    seconds: float | None
    source: TimeSource
    detail: str | None = Field(
        default=None, description="Why the PTB clock could not be used, if so"
    )

    @property
    def minutes(self) -> float | None:
        """The same in minutes."""
        return None if self.seconds is None else self.seconds / 60.0


class PtbTaskBudget(BaseModel):
    """The one field of a PostTrainBench `task.json` this module needs."""

    model_config = ConfigDict(extra="ignore")

    hours: float = Field(gt=0)


class PtbClock(BaseModel):
    """The sandbox's clock reading, the agent's start stamp and the budget."""

    model_config = ConfigDict(frozen=True)

    now_epoch: float
    start_epoch: float
    hours: float = Field(gt=0)

    def seconds_left(self) -> float:
        """Budget end minus now."""
        return self.start_epoch + self.hours * 3600.0 - self.now_epoch


class ExecResultLike(Protocol):
    stdout: str | None
    return_code: int


class ExecEnvironment(Protocol):
    """The part of Harbor's BaseEnvironment this module uses."""

    async def exec(self, command: str, *args: object, **kwargs: object) -> ExecResultLike: ...


def probe_command() -> str:
    """The shell line that prints the sandbox clock, the start stamp and task.json."""
    return render(
        "clock_probe.sh.j2",
        start_file=shlex.quote(PTB_START_FILE),
        task_file=shlex.quote(PTB_TASK_FILE),
        task_marker=_TASK_MARKER,
    ).strip()


def parse_probe_output(stdout: str) -> tuple[PtbClock | None, str | None]:
    """Parse the probe's output: the clock, or None and the reason it is unusable."""
    head, marker, task_text = stdout.partition(_TASK_MARKER)
    fields = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    try:
        now = float(fields.get("now", "").strip())
    except ValueError:
        return None, "the sandbox clock could not be read"
    start_text = fields.get("start", "").strip()
    if not start_text:
        return None, f"no clock stamp at {PTB_START_FILE}"
    try:
        start = float(start_text)
    except ValueError:
        return None, f"{PTB_START_FILE} does not hold epoch seconds"
    if not marker or not task_text.strip():
        return None, f"no {PTB_TASK_FILE}"
    try:
        budget = PtbTaskBudget.model_validate(json.loads(task_text))
    except (ValueError, ValidationError):
        return None, f"{PTB_TASK_FILE} has no positive `hours`"
    return PtbClock(now_epoch=now, start_epoch=start, hours=budget.hours), None


async def read_ptb_clock(environment: ExecEnvironment) -> tuple[PtbClock | None, str | None]:
    """Read the PostTrainBench clock from the environment (None and a reason if absent)."""
    try:
        result = await environment.exec(probe_command(), timeout_sec=PROBE_TIMEOUT_SEC)
    except Exception as exc:  # a dead or unreachable sandbox: treat the clock as unknown
        return None, f"the clock probe failed: {type(exc).__name__}"
    return parse_probe_output(result.stdout or "")


def time_left_from(
    clock: PtbClock | None,
    clock_problem: str | None,
    budget_minutes: float | None,
    elapsed_seconds: float,
) -> TimeLeft:
    """Combine the sources, best first: the task's clock, then `budget_minutes`."""
    if clock is not None:
        return TimeLeft(seconds=clock.seconds_left(), source=TimeSource.PTB_TASK)
    if budget_minutes is not None:
        return TimeLeft(
            seconds=budget_minutes * 60.0 - elapsed_seconds,
            source=TimeSource.BUDGET_MINUTES,
            detail=clock_problem,
        )
    return TimeLeft(seconds=None, source=TimeSource.UNKNOWN, detail=clock_problem)


async def time_left(
    environment: ExecEnvironment, budget_minutes: float | None, elapsed_seconds: float
) -> TimeLeft:
    """The agent's time left, read from `environment` when it is a PostTrainBench task."""
    clock, problem = await read_ptb_clock(environment)
    return time_left_from(clock, problem, budget_minutes, elapsed_seconds)


def format_duration(seconds: float) -> str:
    """'2 h 05 min', '42 min' or 'less than a minute'."""
    minutes = int(max(seconds, 0) // 60)
    if minutes < 1:
        return "less than a minute"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
