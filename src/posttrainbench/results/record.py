"""The run record: one exported Harbor trial, as stored in `RESULTS_DIR/runs/<id>/record.json`."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.integrity.judges.verdict import Judgement
from posttrainbench.schemas import Metrics

RECORD_FILE = "record.json"
RECORD_VERSION = 1
RunStatus = Literal["scored", "errored"]


class Usage(BaseModel):
    """What the agent consumed: LLM tokens and cost, and GPU time."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: Optional[int] = Field(default=None, description="including cached input tokens")
    cache_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    cost_usd: Optional[float] = None
    source: Literal["harbor", "trace", "none"] = Field(
        default="none", description="harbor: the agent's own report in result.json; trace: summed from the trace")
    gpus: int = Field(default=0, ge=0)
    gpu_hours: float = Field(default=0.0, ge=0.0, description="GPUs x the agent's wall-clock hours")


class TimeUsed(BaseModel):
    """Wall-clock time of the trial's phases, against the agent's budget."""

    model_config = ConfigDict(extra="forbid")

    budget_hours: Optional[float] = Field(default=None, description="the task's agent time limit")
    agent_hours: Optional[float] = Field(default=None, description="the agent's execution, start to end")
    total_hours: Optional[float] = Field(default=None, description="the whole trial: setup, agent, verifier")
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None

    @property
    def fraction(self) -> Optional[float]:
        """Share of the budget the agent used."""
        if self.budget_hours and self.agent_hours is not None:
            return self.agent_hours / self.budget_hours
        return None


class ResultRecord(BaseModel):
    """One Harbor trial in the results store (a "run": one attempt of an agent on a task).

    ``score`` is the verifier's accuracy in [0, 1], or the reward when the verifier wrote
    no metrics; it is None for an errored trial. ``flagged`` combines the judges:
    True when any judge flagged the run, False when all five cleared it, None otherwise.
    """

    model_config = ConfigDict(extra="forbid")

    version: int = RECORD_VERSION
    id: str = Field(description="Harbor's trial id (a UUID), unique across jobs")
    job_name: str
    trial_name: str
    task_name: str
    agent: str
    agent_version: Optional[str] = None
    agent_model: Optional[str] = None
    benchmark: str
    base_model: str
    hours: Optional[float] = Field(default=None, description="the task's time budget")
    feedback: Optional[str] = None
    status: RunStatus
    error: Optional[str] = Field(default=None, description="exception type and message of an errored trial")
    score: Optional[float] = None
    reward: Optional[float] = None
    metrics: Optional[Metrics] = None
    verdicts: list[Judgement] = Field(default_factory=list)
    flagged: Optional[bool] = None
    usage: Usage = Field(default_factory=Usage)
    time: TimeUsed = Field(default_factory=TimeUsed)
    trace_files: list[str] = Field(default_factory=list, description="paths relative to the record's directory")
    snapshot_dir: Optional[str] = Field(default=None, description="the agent's code snapshot, relative")
    final_model_dir: Optional[str] = Field(default=None, description="only with --with-final-model, relative")
    refused_files: list[str] = Field(
        default_factory=list, description="'<path in the trial>: <why>' for each file not read or copied: "
        "a link, FIFO, device, hard link, sparse file, or over a cap")
    source_dir: str = Field(description="the trial directory it was exported from")
    fingerprint: str = Field(description="changes when the trial's result or verdicts change")
    exported_at: datetime

    @property
    def agent_label(self) -> str:
        """`agent` or `agent:model`: agents with different models rank separately."""
        return f"{self.agent}:{self.agent_model}" if self.agent_model else self.agent

    @property
    def flagging_judges(self) -> list[Judgement]:
        """The verdicts that flag this run."""
        return [v for v in self.verdicts if v.flagged]

    def write(self, directory: Path) -> Path:
        """Write `record.json` into *directory* (the caller makes the directory appear atomically)."""
        path = directory / RECORD_FILE
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path


def combine_flags(verdicts: list[Judgement], n_judges: int) -> Optional[bool]:
    """True if any judge flagged; False only when all *n_judges* judges cleared the run."""
    if any(v.flagged for v in verdicts):
        return True
    cleared = {v.judge for v in verdicts if v.flagged is False}
    return False if len(cleared) >= n_judges else None
