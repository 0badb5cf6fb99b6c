"""The typed agent-task config (YAML on disk, pydantic in memory).

Paths in the YAML are relative to the YAML file. Secrets are listed by *name* only: the
config never holds a secret value.
"""

from __future__ import annotations

import re
import shlex
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from posttrainbench.core.secrets_file import check_env_names
from posttrainbench.service.shared.errors import AgentTaskConfigError

_SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DEFAULT_CANDIDATE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LOCAL_SANDBOX_ENV = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
_IMPORT_PATH = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tier(StrEnum):
    """What the agent may learn from evaluating a split."""

    VIEWABLE = "viewable"  # per-sample results returned
    AGGREGATE = "aggregate"  # only the mean over at least min_samples samples
    HIDDEN = "hidden"  # the agent cannot evaluate it at all


class SplitPolicy(_Strict):
    """Access tier and budget of one split."""

    tier: Tier
    max_runs: int | None = Field(
        default=None, ge=0, description="evaluations allowed on this split"
    )
    max_samples: int | None = Field(
        default=None, ge=0, description="samples scored in total on this split"
    )
    min_samples: int = Field(
        default=10, ge=1, description="aggregate tier: fewest samples one evaluation may score"
    )

    @model_validator(mode="after")
    def _budgeted(self) -> SplitPolicy:
        # An evaluable split without any budget would let the agent evaluate forever.
        if self.tier != Tier.HIDDEN and self.max_runs is None and self.max_samples is None:
            raise ValueError(f"a {self.tier} split needs max_runs and/or max_samples")
        if (
            self.tier == Tier.AGGREGATE
            and self.max_samples is not None
            and self.max_samples < self.min_samples
        ):
            raise ValueError(
                "max_samples is below min_samples: no aggregate evaluation could ever run"
            )
        return self


class RewardMode(StrEnum):
    """How the final candidate is chosen."""

    SUBMIT = "submit"  # the agent submits one commit (the baseline when none)
    AUTO_BEST = "auto_best"  # the best recorded candidates are re-scored on the selection split


class RewardTarget(_Strict):
    """One key of ``reward.json``: the chosen candidate's mean on one split."""

    split: str
    key: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class RewardConfig(_Strict):
    """Reward mode, selection split and the splits written into ``reward.json``."""

    mode: RewardMode
    selection_split: str | None = None
    top_k: int = Field(
        default=3, ge=1, description="auto_best: how many recorded candidates are re-scored"
    )
    targets: list[RewardTarget] = Field(min_length=1)

    @model_validator(mode="after")
    def _selection(self) -> RewardConfig:
        if self.mode == RewardMode.AUTO_BEST and not self.selection_split:
            raise ValueError("reward mode auto_best needs a selection_split")
        keys = [t.key for t in self.targets]
        if len(set(keys)) != len(keys):
            raise ValueError("reward target keys must be unique")
        return self


class Timeouts(_Strict):
    """Wall-clock limits of one candidate run (the tighter of the two applies)."""

    per_sample_s: float = Field(default=30, gt=0)
    per_eval_s: float = Field(default=600, gt=0)

    def for_samples(self, n: int) -> float:
        """The limit of one run over *n* samples."""
        return min(self.per_eval_s, self.per_sample_s * max(n, 1))


class CandidateLimits(_Strict):
    """What one candidate run (its fresh uid, everything it starts) may use besides time."""

    max_processes: int = Field(default=256, ge=8, description="processes of the run's uid at once")
    max_open_files: int = Field(default=1024, ge=64, description="open files per process")
    max_file_mb: int = Field(default=1024, ge=1, description="size of any one file it writes")
    disk_reserve_mb: int = Field(
        default=256, ge=0, description="the run is stopped when less is left free on its filesystem"
    )
    max_code_mb: int = Field(default=256, ge=1, description="the candidate commit's unpacked size")
    max_code_files: int = Field(default=20000, ge=1, description="files in the candidate commit")
    max_output_mb: int = Field(default=64, ge=1, description="what it may write to stdout")


class ScoringModeA(_Strict):
    """Mode A: the service's dataset and its trusted scorer; the candidate is only a command.

    The command reads JSONL ``{"id","question"}`` on stdin and writes JSONL
    ``{"id","answer"}`` on stdout, in a clean copy of the candidate commit.
    """

    mode: Literal["A"] = "A"
    entry_command: str = Field(description="e.g. 'python3 solve.py', run without a shell")
    path: str = Field(default=DEFAULT_CANDIDATE_PATH, description="PATH given to the candidate")
    pass_env: list[str] = Field(
        default_factory=list, description="non-secret variables passed to the candidate"
    )

    @field_validator("entry_command")
    @classmethod
    def _command(cls, value: str) -> str:
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"entry_command cannot be parsed: {exc}") from None
        if not argv:
            raise ValueError("entry_command is empty")
        return value

    def argv(self) -> list[str]:
        """The entry command as an argument list."""
        return shlex.split(self.entry_command)


class HarborRetry(_Strict):
    """Harbor's retry policy for the nested run (``harbor.models.job.config.RetryConfig``)."""

    max_retries: int = Field(
        default=0, ge=0, description="retries of a failed trial within one nested run"
    )
    include_exceptions: list[str] | None = Field(
        default=None, description="only retry these exception types"
    )
    exclude_exceptions: list[str] | None = Field(
        default=None, description="never retry these (None: Harbor's)"
    )
    wait_multiplier: float = Field(default=1.0, ge=0)
    min_wait_sec: float = Field(default=1.0, ge=0)
    max_wait_sec: float = Field(default=60.0, ge=0)


class ScoringModeB(_Strict):
    """Mode B: a nested Harbor run of the candidate's agent class over Harbor tasks.

    The dataset is a directory with ``tasks/<dir>/task.toml`` (each with ``[task] name =
    "org/name"``) and split files (``<split>.txt``, one task name a line, or
    ``<split>.jsonl``, lines ``{"id": "org/name"}``). One task is one sample.
    """

    mode: Literal["B"]
    agent_import_path: str = Field(
        pattern=_IMPORT_PATH, description="module:Class of a Harbor agent in the candidate repo"
    )
    agent_model: str | None = Field(default=None, description="model_name given to the agent")
    agent_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of the agent"
    )
    environment: str = Field(
        default=LOCAL_SANDBOX_ENV,
        pattern=_IMPORT_PATH,
        description="import path of the Harbor environment the tasks run on",
    )
    n_attempts: int = Field(
        default=1, ge=1, le=100, description="trials per task (Harbor's n_attempts)"
    )
    retry: HarborRetry = Field(default_factory=HarborRetry)
    n_concurrent: int = Field(
        default=1, ge=1, le=64, description="trials the nested run runs at once"
    )
    aggregation: Literal["best", "mean"] = Field(
        default="best",
        description="best: the best trial per task; mean: the mean over its attempts",
    )
    reward_key: str = Field(
        default="reward", description="the verifier's reward key that scores a trial"
    )
    nested_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="wall-clock limit of one nested run (None: timeouts.for_samples(n))",
    )
    agent_python: str | None = Field(
        default=None,
        description="interpreter of the candidate's agent host (None: the service's own); "
        "any user must be able to run it (a root service runs each host as a fresh uid) and it must load "
        "the service's harbor",
    )
    path: str = Field(
        default=DEFAULT_CANDIDATE_PATH, description="PATH given to the candidate's agent host"
    )
    pass_env: list[str] = Field(
        default_factory=list,
        description="non-secret variables passed to the candidate's agent host",
    )
    candidate_network: bool | None = Field(
        default=None,
        description="whether the candidate's agent host may open sockets (model APIs); false: "
        "none, like Mode A's candidates. None: `ptb agent-task build` decides (off in a task "
        "built without a network, where a socket could only reach the agent or the service); "
        "a service started by hand treats it as on",
    )

    @property
    def network(self) -> bool:
        """Whether the candidate may open sockets (unset: yes)."""
        return self.candidate_network is not False


ScoringMode = Annotated[ScoringModeA | ScoringModeB, Field(discriminator="mode")]


class AgentTaskConfig(_Strict):
    """One agent-optimization task."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    baseline: Path = Field(
        description="baseline agent repository: `ptb agent-task build` takes its committed "
        "HEAD (git archive); the service alone also accepts a plain directory"
    )
    dataset: Path = Field(
        description="Mode A: <split>.jsonl files, lines {id, question, answer}; "
        "Mode B: tasks/ (Harbor task dirs) and split files of task names"
    )
    splits: dict[str, SplitPolicy] = Field(
        description="tier and budget per split; an unlisted split is hidden"
    )
    reward: RewardConfig
    secrets: list[str] = Field(
        default_factory=list, description="names of host variables; never values"
    )
    timeouts: Timeouts = Field(default_factory=Timeouts)
    limits: CandidateLimits = Field(default_factory=CandidateLimits)
    concurrency: int = Field(
        default=1, ge=1, le=64, description="evaluations the service runs at once"
    )
    scoring: ScoringMode

    @field_validator("scoring", mode="before")
    @classmethod
    def _default_mode(cls, value: object) -> object:
        # Configs written before Mode B existed have no ``mode``: they are Mode A.
        if isinstance(value, dict) and "mode" not in value:
            return {**value, "mode": "A"}
        return value

    @field_validator("secrets", mode="before")
    @classmethod
    def _secret_names(cls, value: object) -> object:
        if isinstance(value, dict):
            raise ValueError("secrets lists variable names only, never values")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_syntax(cls, value: list[str]) -> list[str]:
        return check_env_names(value, "secret name")

    @model_validator(mode="after")
    def _consistent(self) -> AgentTaskConfig:
        for split in self.splits:
            if not _SPLIT_NAME.match(split):
                raise ValueError(f"split name {split!r} is not a plain file stem")
        selection = self.reward.selection_split
        if selection is not None and self.tier(selection) == Tier.HIDDEN:
            raise ValueError(
                f"selection split {selection!r} must be viewable or aggregate (candidates are recorded on it)"
            )
        leaked = set(self.scoring.pass_env) & set(self.secrets)
        if leaked:
            raise ValueError(
                f"scoring.pass_env would give secrets to the candidate: {sorted(leaked)}"
            )
        return self

    def tier(self, split: str) -> Tier:
        """The split's tier; an unlisted split is hidden."""
        policy = self.splits.get(split)
        return policy.tier if policy else Tier.HIDDEN

    def evaluable_splits(self) -> list[str]:
        """Splits the agent may evaluate (viewable or aggregate)."""
        return [name for name, policy in self.splits.items() if policy.tier != Tier.HIDDEN]


def _one_line(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "config"
        parts.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def parse_config(data: object, base_dir: Path, source: str = "config") -> AgentTaskConfig:
    """Validate *data* (a parsed YAML mapping) and resolve its paths against *base_dir*."""
    if not isinstance(data, dict):
        raise AgentTaskConfigError(f"{source}: expected a mapping at the top level")
    try:
        config = AgentTaskConfig.model_validate(data)
    except ValidationError as exc:
        raise AgentTaskConfigError(f"{source}: {_one_line(exc)}") from None
    return config.model_copy(
        update={
            "baseline": (base_dir / config.baseline).resolve(),
            "dataset": (base_dir / config.dataset).resolve(),
        }
    )
