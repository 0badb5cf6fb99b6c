"""`ptb sweep status`: progress, LLM cost and GPU-hours of a sweep so far."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from posttrainbench.core.trial_outcome import RETRIED_KINDS
from posttrainbench.host.results.harbor_trial import TrialInProgress, TrialReadError, read_trial
from posttrainbench.host.sweep.runner_state import read_runner_info, runner_alive
from posttrainbench.host.sweep.spec import SWEEP_FILE, SweepError, SweepSpec

RunnerState = Literal["running", "stopped", "condor"]


class AgentProgress(BaseModel):
    """One agent's share of the sweep."""

    agent: str
    planned: int
    scored: int = Field(default=0, description="completed: the verifier scored the final model")
    no_model: int = Field(default=0, description="finished, but no usable final model was left")
    errored: int = Field(default=0, description="an agent, infra or verifier error")
    to_retry: int = Field(
        default=0, description="of the errored: infra or verifier errors a resume runs again"
    )
    running: int = Field(
        default=0, description="trial dirs without a result yet, while the runner is alive"
    )
    interrupted: int = Field(
        default=0,
        description="trial dirs without a result whose runner is gone: a resume runs them again",
    )
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    gpu_hours: float = 0.0
    agent_hours: float = 0.0

    @computed_field
    @property
    def pending(self) -> int:
        """Planned trials not started yet."""
        done = self.scored + self.no_model + self.errored
        return max(self.planned - done - self.running - self.interrupted, 0)


class SweepStatus(BaseModel):
    """The whole sweep."""

    sweep_dir: str
    planned: int
    retired: int = Field(default=0, description="failed trials moved aside and run again")
    agents: list[AgentProgress]
    unreadable: list[str] = Field(default_factory=list)
    runner: RunnerState = Field(
        default="stopped",
        description="running: a runner holds the sweep's lock; stopped: none does (finished, "
        "killed or never started); condor: trials run as HTCondor jobs, no local runner",
    )
    runner_pid: int | None = Field(default=None, description="pid of the last runner")
    resume_command: str | None = Field(
        default=None,
        description="when stopped with trials left: the command that resumes the sweep",
    )

    def total(self, field: str) -> float:
        """Sum of one AgentProgress field over the agents (None counts as 0)."""
        return sum(getattr(a, field) or 0 for a in self.agents)


def _add(current, value):
    return current if value is None else (current or 0) + value


def sweep_status(sweep_dir: Path) -> SweepStatus:
    """Read every trial of the sweep's Harbor job."""
    path = sweep_dir / SWEEP_FILE
    if not path.is_file():
        raise SweepError(f"{sweep_dir} is not a sweep directory (no {SWEEP_FILE})")
    spec = SweepSpec.model_validate_json(path.read_text(encoding="utf-8"))
    per_agent = len(spec.benchmarks) * len(spec.models) * spec.attempts
    progress = {a.label: AgentProgress(agent=a.label, planned=per_agent) for a in spec.agents}
    unreadable: list[str] = []
    # One Harbor job (jobs/<sweep name>/) on the local, docker and cloud environments; one job per
    # trial (jobs/<trial>/) on HTCondor.
    jobs = sweep_dir / "jobs"
    trials = sorted(
        t
        for job in (jobs.iterdir() if jobs.is_dir() else [])
        if job.is_dir()
        for t in job.iterdir()
        if t.is_dir() and (t / "config.json").is_file()
    )
    for trial in trials:
        # By the trial's own config: Harbor names a custom agent by its name(), not its path.
        entry = progress.get(_label_from_config(trial) or "")
        if entry is None:
            unreadable.append(f"{trial.name}: no readable config.json naming an agent of the sweep")
            continue
        try:
            record = read_trial(trial).record
        except TrialInProgress:
            entry.running += 1
            continue
        except TrialReadError as exc:
            if (trial / "result.json").is_file():
                unreadable.append(f"{trial.name}: {exc}")
            else:
                entry.running += 1
            continue
        if record.status == "completed":
            entry.scored += 1
        elif record.status == "no_model":
            entry.no_model += 1
        else:
            entry.errored += 1
            entry.to_retry += record.status in RETRIED_KINDS
        entry.cost_usd = _add(entry.cost_usd, record.usage.cost_usd)
        entry.input_tokens = _add(entry.input_tokens, record.usage.input_tokens)
        entry.output_tokens = _add(entry.output_tokens, record.usage.output_tokens)
        entry.gpu_hours += record.usage.gpu_hours
        entry.agent_hours += record.time.agent_hours or 0.0
    retired = sweep_dir / "retired"
    status = SweepStatus(
        sweep_dir=str(sweep_dir),
        planned=spec.n_trials,
        agents=list(progress.values()),
        retired=sum(1 for p in retired.iterdir() if p.is_dir()) if retired.is_dir() else 0,
        unreadable=unreadable,
    )
    _settle_runner(status, sweep_dir, spec)
    return status


def _settle_runner(status: SweepStatus, sweep_dir: Path, spec: SweepSpec) -> None:
    """Say whether a runner is at work; without one, unfinished trials are interrupted,
    not running, and the status names the command that resumes the sweep."""
    info = read_runner_info(sweep_dir)
    status.runner_pid = info.pid if info else None
    if spec.env == "condor":  # the jobs run on the pool: no local runner to watch
        status.runner = "condor"
        return
    if runner_alive(sweep_dir):
        status.runner = "running"
        return
    status.runner = "stopped"
    for entry in status.agents:
        entry.interrupted, entry.running = entry.running, 0
    if any(entry.interrupted or entry.pending for entry in status.agents):
        status.resume_command = (
            info.resume_command(sweep_dir)
            if info
            else f"ptb sweep ... -o {sweep_dir} (the settings it was started with)"
        )


def _label_from_config(trial: Path) -> str | None:
    """The agent label of a trial that has no result yet, from Harbor's config.json."""
    from harbor.models.trial.config import TrialConfig

    try:
        config = TrialConfig.model_validate_json(
            (trial / "config.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return None
    # A re-prompted agent's config names the wrapper; the sweep knows it by its inner agent.
    agent = config.agent.kwargs.get("inner") or config.agent.import_path or config.agent.name or ""
    return f"{agent}:{config.agent.model_name}" if config.agent.model_name else agent
