"""`sweep.json`: what a sweep runs. The same command gives the same spec, hence the same
directory, which is what makes running it again a resume."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import PtbError
from posttrainbench.host.tasks.options import CompileOptions

SWEEP_FILE = "sweep.json"
SweepEnv = Literal["local", "docker", "modal", "daytona", "condor"]
# infra: re-run the trials trial_outcome.RETRIED_KINDS names (infrastructure and verifier
# failures, outside the agent's control); "errored" in summaries also counts the agent's
# own errors, which are never run again. "errored" is the old name of "infra": sweep
# files written before the rename, and the old CLI word, still read as "infra".
RetryPolicy = Literal["infra", "none"]
LEGACY_RETRY_NAMES = {"errored": "infra"}


class SweepError(PtbError):
    """A sweep cannot be planned or resumed as asked."""


class AgentChoice(BaseModel):
    """One agent of the matrix: a Harbor agent name or `module:Class`, and its model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    model: str | None = None

    @property
    def label(self) -> str:
        """`agent` or `agent:model`, as the results leaderboard names it."""
        return f"{self.agent}:{self.model}" if self.model else self.agent


def parse_agents(text: str) -> list[AgentChoice]:
    """`AGENT[:MODEL],...`. An import path (`pkg.module:Class`) keeps its first colon:
    `pkg.module:Class:provider/model`."""
    choices: list[AgentChoice] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        head, sep, rest = item.partition(":")
        if "." in head and sep:  # an import path: module:Class[:model]
            cls, sep2, model = rest.partition(":")
            if not cls:
                raise SweepError(f"bad agent {item!r}: expected module:Class[:model]")
            choices.append(AgentChoice(agent=f"{head}:{cls}", model=model or None))
        else:
            if not head:
                raise SweepError(f"bad agent {item!r}: expected AGENT[:MODEL]")
            choices.append(AgentChoice(agent=head, model=rest or None))
    if not choices:
        raise SweepError("-a/--agent names no agent; give AGENT[:MODEL],...")
    if len(set(choices)) != len(choices):
        raise SweepError(f"-a/--agent repeats an agent: {text}")
    return choices


class SweepSpec(BaseModel):
    """The matrix and how to run it."""

    model_config = ConfigDict(extra="forbid")

    benchmarks: list[str] = Field(min_length=1)
    models: list[str] = Field(min_length=1)
    agents: list[AgentChoice] = Field(min_length=1)
    env: SweepEnv = "local"
    attempts: int = Field(default=1, ge=1)
    concurrency: int = Field(default=1, ge=1)
    retry: RetryPolicy = Field(
        default="infra",
        description="on resume: re-run trials with an infra or verifier error, or keep them",
    )

    @field_validator("retry", mode="before")
    @classmethod
    def _old_retry_name(cls, value: object) -> object:
        return LEGACY_RETRY_NAMES.get(value, value) if isinstance(value, str) else value

    cache_volume: str | None = Field(
        default=None, description="modal/daytona: shared read-only cache volume"
    )
    reprompt_min_minutes: float | None = Field(
        default=None,
        gt=0,
        description="re-prompt agents that stop with at least this many minutes left (None: never)",
    )
    options: CompileOptions = Field(default_factory=CompileOptions)

    def key(self) -> str:
        """A short digest of what is run and how (all but the retry policy). The
        concurrency counts: Harbor resumes a job only with the config it started with.
        Settings left at their defaults are left out, so a field added later keeps the
        keys of older sweeps."""
        fixed = self.model_dump(mode="json", exclude={"retry"}, exclude_defaults=True)
        return hashlib.sha256(repr(sorted(fixed.items())).encode()).hexdigest()[:10]

    def differences(self, other: SweepSpec) -> list[str]:
        """The settings in which *other* differs (the retry policy may change freely)."""
        mine, theirs = self.model_dump(mode="json"), other.model_dump(mode="json")
        return [k for k in mine if k != "retry" and mine[k] != theirs[k]]

    @property
    def n_trials(self) -> int:
        """Planned trials: tasks x agents x attempts."""
        return len(self.benchmarks) * len(self.models) * len(self.agents) * self.attempts

    def dump(self, path: Path) -> None:
        """Write atomically."""
        write_text_atomic(path, self.model_dump_json(indent=2) + "\n")
