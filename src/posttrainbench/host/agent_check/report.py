"""The result of one agent check: a row per stage, pass or fail, with its time."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field

from posttrainbench.task.schemas import _FileModel

StageName = Literal[
    "install",
    "auth",
    "agent run",
    "trace parsed",
    "final_model handed off",
    "verifier reward",
    "judges",
    "secrets scrubbed",
]
STAGES: tuple[StageName, ...] = get_args(StageName)
"""Every stage, in the order a check runs them."""


class StageResult(BaseModel):
    """One stage: whether it passed, how long it took, and what was seen."""

    stage: StageName
    ok: bool
    seconds: float | None = Field(default=None, ge=0)
    detail: str = ""


class CheckReport(_FileModel):
    """Every stage of one check, written as ``check.json`` in the check's run dir."""

    agent: str
    cli_version: str | None = None
    env: str
    run_dir: str
    stages: list[StageResult] = Field(default_factory=list)
    requests: int = Field(default=0, description="requests the scripted model answered")
    reward: float | None = None

    @property
    def passed(self) -> bool:
        """Every stage ran and passed."""
        return len(self.stages) == len(STAGES) and all(s.ok for s in self.stages)

    @property
    def first_failure(self) -> StageResult | None:
        """The first stage that failed, if any."""
        return next((s for s in self.stages if not s.ok), None)

    @property
    def path(self) -> Path:
        """Where the report is written."""
        return Path(self.run_dir) / "check.json"
