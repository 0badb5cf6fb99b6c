"""The embedded default: one offline trial of the reference solution on the local sandbox."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.runner.job_runner import RunRequest, execute
from posttrainbench.runner.record import RunRecord
from posttrainbench.tasks.options import CompileOptions

DEMO_BENCHMARK = "bfcl"
DEMO_MODEL = "smollm2-135m"


class DemoSettings(BaseModel):
    """Knobs of `ptb demo`; the defaults fit 2 CPU cores and 10 minutes."""

    model_config = ConfigDict(extra="forbid")

    runs_dir: Path = Path("ptb-runs")
    limit: int = Field(default=50, ge=1, description="Test questions scored, for both models")
    train_minutes: float = Field(default=3.5, gt=0)


class DemoResult(BaseModel):
    """What the demo prints."""

    record: RunRecord
    base_score: float | None
    final_score: float | None
    n: int | None
    seconds: float
    error: str | None = None


def demo_request(settings: DemoSettings) -> RunRequest:
    """The run that `ptb demo` performs."""
    options = CompileOptions(
        hours=0.5,
        gpus=0,
        cpus=2,
        memory_gb=8,
        storage_gb=20,
        agent_eval_limit=settings.limit,
        final_eval_limit=settings.limit,
        score_base_model=True,
        verifier_timeout_min=20,
        solution_minutes=settings.train_minutes,
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


def summarize(record: RunRecord, seconds: float) -> DemoResult:
    """Read the verifier's metrics.json of the demo's single trial."""
    from posttrainbench.schemas import Metrics

    trial = record.trials[0] if record.trials else None
    if trial is None or trial.metrics_path is None:
        error = trial.error if trial else "the job produced no trial"
        return DemoResult(record=record, base_score=None, final_score=None, n=None, seconds=seconds,
                          error=error or "the verifier wrote no metrics.json")
    metrics = Metrics.model_validate(json.loads(Path(trial.metrics_path).read_text()))
    base = metrics.base_model.accuracy if metrics.base_model else None
    return DemoResult(record=record, base_score=base, final_score=metrics.accuracy, n=metrics.n,
                      seconds=seconds, error=metrics.error or trial.error)


async def run_demo(settings: DemoSettings) -> DemoResult:
    """Compile, run and score the demo trial."""
    started = time.monotonic()
    record = await execute(demo_request(settings))
    return summarize(record, time.monotonic() - started)
