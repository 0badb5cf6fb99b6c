"""The embedded default: one offline trial of the reference solution on the local sandbox."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.host.runner.agent_log import watch_agent_log
from posttrainbench.host.runner.job_runner import RunRequest, execute, job_dir_of
from posttrainbench.host.runner.record import RunRecord
from posttrainbench.host.runner.verifier_progress import watch_verifier
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.schemas import VerifierProgress

DEMO_BENCHMARK = "bfcl"
DEMO_MODEL = "smollm2-135m"
ORACLE_LOG = "oracle.txt"  # Harbor's oracle agent writes the solution's output there


class DemoSettings(BaseModel):
    """Knobs of `ptb demo`; the defaults fit 2 CPU cores and 10 minutes."""

    model_config = ConfigDict(extra="forbid")

    runs_dir: Path = Path("ptb-runs")
    limit: int = Field(default=50, ge=1, description="Test questions scored, for both models")
    train_steps: int | None = Field(
        default=None,
        ge=1,
        description="Reference fine-tune's optimizer steps; None: the solution's default",
    )


class TrainingSummary(BaseModel):
    """What the reference fine-tune says it did (``final_model/ptb_training.json``), display only."""

    model_config = ConfigDict(extra="ignore")

    steps: int = Field(ge=0)
    steps_planned: int | None = Field(default=None, ge=0)
    stopped_early: bool = False
    train_seconds: float | None = Field(default=None, ge=0)


class DemoResult(BaseModel):
    """What the demo prints."""

    record: RunRecord
    base_score: float | None
    final_score: float | None
    base_stderr: float | None = None
    final_stderr: float | None = None
    n: int = Field(
        description="Test questions both models were scored on (asked for, when none was scored)"
    )
    seconds: float
    error: str | None = None
    training: TrainingSummary | None = None


MAX_TRAINING_SUMMARY_BYTES = 64 * 1024
# Harbor copies the collected /logs/artifacts under the trial's artifacts/logs/artifacts.
TRAINING_SUMMARY_PATH = "artifacts/logs/artifacts/final_model/ptb_training.json"


def demo_request(settings: DemoSettings) -> RunRequest:
    """The run that `ptb demo` performs."""
    options = CompileOptions(
        hours=1.0,  # the fine-tune is a fixed number of steps; a busy machine needs more time for them
        gpus=0,
        cpus=2,
        memory_gb=8,
        storage_gb=20,
        agent_eval_limit=settings.limit,
        final_eval_limit=settings.limit,
        score_base_model=True,
        # Generous: the verifier's limits scale with the machine's measured speed, and
        # only this bounds them, so a busy machine still gets its (slow) score.
        verifier_timeout_min=60,
        solution_steps=settings.train_steps,
    )
    return RunRequest(
        benchmark=DEMO_BENCHMARK,
        model=DEMO_MODEL,
        agent="oracle",
        env="local",
        runs_dir=settings.runs_dir,
        command="demo",
        run_id=f"demo-{time.strftime('%Y%m%d-%H%M%S')}",
        options=options,
    )


def summarize(record: RunRecord, seconds: float, limit: int) -> DemoResult:
    """Read the verifier's metrics.json of the demo's single trial (*limit*: the questions asked)."""
    from posttrainbench.task.schemas import Metrics

    trial = record.trials[0] if record.trials else None
    if trial is None or trial.metrics_path is None:
        error = trial.error if trial else "the job produced no trial"
        return DemoResult(
            record=record,
            base_score=None,
            final_score=None,
            n=limit,
            seconds=seconds,
            error=error or "the verifier wrote no metrics.json",
            training=read_training_summary(Path(trial.trial_dir)) if trial else None,
        )
    metrics = Metrics.model_validate(json.loads(Path(trial.metrics_path).read_text()))
    base = metrics.base_model
    # A model that got no score has n=0 in its metrics; the questions are still these.
    n = metrics.n or (base.n if base else 0) or limit
    return DemoResult(
        record=record,
        base_score=base.accuracy if base and not base.error else None,
        final_score=metrics.accuracy,
        base_stderr=base.stderr if base and not base.error else None,
        final_stderr=metrics.stderr,
        n=n,
        seconds=seconds,
        error=metrics.error or trial.error,
        training=read_training_summary(Path(trial.trial_dir)),
    )


def read_training_summary(trial_dir: Path) -> TrainingSummary | None:
    """The fine-tune's own summary from the trial's artifacts (no link followed, size capped)."""
    try:
        with SafeDir.open(trial_dir) as trial:
            raw = trial.read_bytes(TRAINING_SUMMARY_PATH, MAX_TRAINING_SUMMARY_BYTES)
        return TrainingSummary.model_validate_json(raw)
    except (OSError, ValidationError, ValueError):
        return None


async def run_demo(
    settings: DemoSettings,
    on_progress: Callable[[VerifierProgress], None] | None = None,
    on_agent_line: Callable[[str], None] | None = None,
) -> DemoResult:
    """Compile, run and score the demo trial; *on_progress* hears of the verifier's progress,
    *on_agent_line* of each line of the reference solution's log (its training steps)."""
    started = time.monotonic()
    request = demo_request(settings)
    job_dir = job_dir_of(request.runs_dir, request.run_id)
    watchers = []
    if on_progress is not None:
        watchers.append(asyncio.create_task(watch_verifier(job_dir, on_progress)))
    if on_agent_line is not None:
        watchers.append(asyncio.create_task(watch_agent_log(job_dir, ORACLE_LOG, on_agent_line)))
    try:
        record = await execute(request)
    finally:
        for watcher in watchers:
            watcher.cancel()
    return summarize(record, time.monotonic() - started, settings.limit)
