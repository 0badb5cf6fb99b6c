"""When the re-prompting wrapper runs its inner agent again, and the record of each round.

The decision is a pure function of the settings, the number of re-prompts so far and
the time left, so it is tested without an environment. Each round's outcome is one
`RoundRecord` line of the JSON-lines log in the agent's logs dir.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.nofollow import open_for_writing
from posttrainbench.host.agents.time_budget import TimeLeft, TimeSource

DEFAULT_MIN_REMAINING_MINUTES = 30.0
DEFAULT_MAX_REPROMPTS = 10


class StopReason(StrEnum):
    """Why the wrapper stopped re-prompting after a round."""

    TIME_BELOW_MINIMUM = "time_left_below_minimum"
    MAX_REPROMPTS = "max_reprompts_reached"
    BUDGET_UNKNOWN = "budget_unknown"
    INNER_ERROR = "inner_agent_error"
    CANCELLED = "cancelled"


class RepromptSettings(BaseModel):
    """The wrapper's own kwargs (everything else goes to the inner agent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inner: str = Field(min_length=1, description="Harbor agent name (claude-code) or module:Class")
    min_remaining_minutes: float = Field(
        default=DEFAULT_MIN_REMAINING_MINUTES,
        ge=0,
        description="Do not re-prompt with less time left than this",
    )
    max_reprompts: int = Field(default=DEFAULT_MAX_REPROMPTS, ge=0)
    budget_minutes: float | None = Field(
        default=None,
        gt=0,
        description="Budget for tasks without a PostTrainBench clock, from the wrapper's start",
    )


class Decision(BaseModel):
    """Run again, or stop and why."""

    model_config = ConfigDict(frozen=True)

    reprompt: bool
    reason: StopReason | None = None


def decide(settings: RepromptSettings, reprompts_done: int, left: TimeLeft) -> Decision:
    """Re-prompt while the count allows and at least the minimum time is known to remain."""
    if reprompts_done >= settings.max_reprompts:
        return Decision(reprompt=False, reason=StopReason.MAX_REPROMPTS)
    if left.seconds is None:
        return Decision(reprompt=False, reason=StopReason.BUDGET_UNKNOWN)
    if left.seconds < settings.min_remaining_minutes * 60.0:
        return Decision(reprompt=False, reason=StopReason.TIME_BELOW_MINIMUM)
    return Decision(reprompt=True)


class RoundUsage(BaseModel):
    """Tokens and cost one round reported in its own AgentContext (None: not reported)."""

    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class RoundRecord(BaseModel):
    """One line of `reprompt.jsonl`: what a round was and what came after it."""

    model_config = ConfigDict(extra="forbid")

    round: int = Field(ge=1, description="1 is the original instruction")
    inner_agent: str
    prompt: str = Field(description="'instruction' or 'continuation'")
    resumed_session: bool = Field(description="The inner agent continued its own session")
    started_at: datetime
    finished_at: datetime
    duration_sec: float = Field(ge=0)
    time_left_minutes: float | None = None
    time_source: TimeSource = TimeSource.UNKNOWN
    time_detail: str | None = None
    min_remaining_minutes: float
    reprompts_done: int = Field(ge=0, description="Re-prompts before this round's decision")
    max_reprompts: int
    action: str = Field(description="'reprompt' or 'stop'")
    stop_reason: StopReason | None = None
    error: str | None = Field(default=None, description="Exception type when the round raised")
    usage: RoundUsage = Field(default_factory=RoundUsage)


def append_record(path: Path, record: RoundRecord) -> None:
    """Append one JSON line (the file survives a crash of a later round).

    The log sits in the trial's agent dir, beside files copied out of the sandbox: it is
    opened without following a link (O_NOFOLLOW), so a link of that name is refused,
    never written through.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_for_writing(path, 0o644, append=True)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file; not appending to it")
        handle.write(record.model_dump_json() + "\n")


def read_records(path: Path) -> list[RoundRecord]:
    """All records of a log, in order (tests and reports)."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [RoundRecord.model_validate_json(line) for line in lines if line.strip()]
