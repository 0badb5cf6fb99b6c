"""The run record: one exported Harbor trial, as a results store keeps it (`store.py`)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrainbench.core.trial_outcome import OutcomeKind, exception_kind
from posttrainbench.core.verdict import Judgement
from posttrainbench.task.integrity.agentic.verdicts import AgenticStatus
from posttrainbench.task.schemas import Metrics, TaskSpec, legacy_failure

RECORD_FILE = "record.json"
RECORD_VERSION = 1
RunStatus = OutcomeKind


class Usage(BaseModel):
    """What the agent consumed: LLM tokens and cost, and GPU time."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = Field(default=None, description="including cached input tokens")
    cache_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    source: Literal["harbor", "trace", "none"] = Field(
        default="none",
        description="harbor: the agent's own report in result.json; trace: summed from the trace",
    )
    gpus: int = Field(default=0, ge=0)
    gpu_hours: float = Field(default=0.0, ge=0.0, description="GPUs x the agent's wall-clock hours")


class TimeUsed(BaseModel):
    """Wall-clock time of the trial's phases, against the agent's budget."""

    model_config = ConfigDict(extra="forbid")

    budget_hours: float | None = Field(default=None, description="the task's agent time limit")
    agent_hours: float | None = Field(
        default=None, description="the agent's execution, start to end"
    )
    total_hours: float | None = Field(
        default=None, description="the whole trial: setup, agent, verifier"
    )
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def fraction(self) -> float | None:
        """Share of the budget the agent used."""
        if self.budget_hours and self.agent_hours is not None:
            return self.agent_hours / self.budget_hours
        return None


class ResultRecord(BaseModel):
    """One Harbor trial in the results store (a "run": one attempt of an agent on a task).

    ``score`` is the verifier's accuracy in [0, 1], or the reward when the verifier wrote
    no metrics, of a ``completed`` trial; None for every other outcome. ``flagged`` combines the judges:
    True when any judge flagged the run, False when all five cleared it, None otherwise.
    """

    model_config = ConfigDict(extra="forbid")

    version: int = RECORD_VERSION
    id: str = Field(description="Harbor's trial id (a UUID), unique across jobs")
    job_name: str
    trial_name: str
    task_name: str
    agent: str
    agent_version: str | None = None
    agent_model: str | None = None
    benchmark: str
    base_model: str
    hours: float | None = Field(default=None, description="the task's time budget")
    feedback: str | None = None
    task_spec: TaskSpec | None = Field(
        default=None, description="the task as the verifier saw it (what a re-score compiles)"
    )
    task_version: str | None = Field(
        default=None,
        description="the scorer's version (posttrainbench.host.tasks.task_version); None: unversioned",
    )
    task_inputs: dict[str, str] = Field(
        default_factory=dict,
        description="that version's hash of each input group (TaskVersion.inputs): what a "
        "re-score at another version changed; empty for versions without it",
    )
    task_compiled_at: datetime | None = Field(
        default=None, description="when that version was compiled: orders versions"
    )
    rescore_of: str | None = Field(
        default=None,
        description="for a re-score (`ptb rescore`): the id of the run whose model it scored",
    )
    status: RunStatus = Field(
        description="the trial's outcome kind (posttrainbench.core.trial_outcome)"
    )
    error: str | None = Field(
        default=None, description="the outcome's one-line reason when it is not completed"
    )
    score: float | None = None
    reward: float | None = None
    metrics: Metrics | None = None
    verdicts: list[Judgement] = Field(default_factory=list)
    ptb_judges: AgenticStatus | None = Field(
        default=None,
        description="PostTrainBench's agentic judges (verifier/ptb_judges.json), beside ours; "
        "they do not enter `flagged`",
    )
    flagged: bool | None = None
    usage: Usage = Field(default_factory=Usage)
    time: TimeUsed = Field(default_factory=TimeUsed)
    trace_files: list[str] = Field(
        default_factory=list,
        description="the stored trace files, best first: names of the run's stored files "
        "(the store's `files` rows, or paths in its run dir)",
    )
    agent_log: str | None = Field(
        default=None,
        description="for an agent without a structured trace (oracle, nop, custom): the "
        "head of its plain log, relative",
    )
    samples_file: str | None = Field(
        default=None,
        description="the verifier's per-question verdicts and completion heads "
        "(verifier/samples.jsonl), relative: display only",
    )
    snapshot_dir: str | None = Field(
        default=None, description="the agent's code snapshot, relative"
    )
    final_model_dir: str | None = Field(
        default=None, description="only with --with-final-model, relative"
    )
    refused_files: list[str] = Field(
        default_factory=list,
        description="'<path in the trial>: <why>' for each file not read or copied: "
        "a link, FIFO, device, hard link, sparse file, or over a cap",
    )
    source_dir: str = Field(description="the trial directory it was exported from")
    fingerprint: str = Field(description="changes when the trial's result or verdicts change")
    exported_at: datetime

    @model_validator(mode="before")
    @classmethod
    def _status_of_older_records(cls, data: Any) -> Any:
        """Records stored before the outcome kinds said only scored or errored."""
        if isinstance(data, dict) and data.get("status") in ("scored", "errored"):
            data = {**data, "status": legacy_status(data)}
        return data

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


def combine_flags(verdicts: list[Judgement], n_judges: int) -> bool | None:
    """True if any judge flagged; False only when all *n_judges* judges cleared the run."""
    if any(v.flagged for v in verdicts):
        return True
    cleared = {v.judge for v in verdicts if v.flagged is False}
    return False if len(cleared) >= n_judges else None


def legacy_status(data: dict[str, Any]) -> OutcomeKind:
    """The outcome kind of a record stored as scored/errored, from its own error text: the
    older exporter wrote `verifier: <metrics.json error>`, `the verifier wrote no reward`,
    or `<exception type>: <message>` (its phase is lost: an unknown type is the agent's)."""
    if data.get("status") == "scored":
        return "completed"
    error = str(data.get("error") or "")
    if error.startswith("verifier: "):
        failure = legacy_failure(error.removeprefix("verifier: "))
        return "verifier_error" if failure == "verifier" else "no_model"
    if error.startswith("the verifier wrote no reward"):
        return "verifier_error"
    return exception_kind(error.partition(":")[0].strip())
