"""The run record: a machine-readable summary of one `ptb run` or `ptb demo`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.trial_outcome import OutcomeKind
from posttrainbench.host.credentials.resolve import CredentialSummary
from posttrainbench.host.credentials.scrub import ScrubReport


class TrialRecord(BaseModel):
    """One Harbor trial of a run."""

    trial_name: str
    trial_dir: str
    outcome: OutcomeKind | None = Field(
        default=None, description="posttrainbench.core.trial_outcome's kind (None: an older record)"
    )
    reward: float | None = None
    error: str | None = Field(
        default=None, description="the outcome's one-line reason when it is not completed"
    )
    metrics_path: str | None = None


def run_status(outcomes: list[OutcomeKind]) -> str:
    """A finished run's status: its trials' one outcome kind, or "mixed" (each trial says)."""
    kinds = set(outcomes)
    if not kinds:
        return "no_trials"
    return kinds.pop() if len(kinds) == 1 else "mixed"


class RunRecord(BaseModel):
    """Everything needed to find and interpret a run's results later."""

    run_id: str
    command: str
    benchmark: str
    model: str
    agent: str
    agent_model: str | None = None
    environment: str
    hours: float
    attempts: int
    task_dir: str
    job_dir: str
    harbor_version: str
    posttrainbench_version: str
    started_at: datetime
    finished_at: datetime | None = None
    status: str = Field(
        default="running",
        description="running, failed (the job did not run), or when the job ended: the trials' "
        "outcome kind (completed, no_model, agent_error, infra_error, verifier_error) or mixed",
    )
    trials: list[TrialRecord] = Field(default_factory=list)
    credentials: CredentialSummary | None = Field(
        default=None,
        description="How the agent authenticated: kind and variable names, never values",
    )
    scrub: ScrubReport | None = Field(
        default=None, description="The secret scrub of the run directory after the job ended"
    )

    @property
    def path(self) -> Path:
        """Where this record lives: `<runs dir>/<run id>/run.json`, beside `tasks/`."""
        return Path(self.task_dir).parent.parent / "run.json"

    def write(self, path: Path) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a record."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, self.model_dump_json(indent=2))

    @classmethod
    def read(cls, path: Path) -> RunRecord:
        """Read a record written by `write`."""
        return cls.model_validate(json.loads(path.read_text()))
