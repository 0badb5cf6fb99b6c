"""`ptb run`'s table: a trial that leaves no model shows why, whatever else its
metrics.json holds."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path

from rich.console import Console

from posttrainbench.host.cli.summary import print_trials
from posttrainbench.host.runner.job_runner import _metrics
from posttrainbench.host.runner.record import RunRecord, TrialRecord


def _trial_dir(tmp_path: Path, metrics: object) -> Path:
    trial = tmp_path / "trial"
    (trial / "verifier").mkdir(parents=True)
    (trial / "verifier" / "metrics.json").write_text(json.dumps(metrics))
    return trial


def test_the_no_model_reason_is_read_from_any_metrics_version(tmp_path: Path) -> None:
    # A field this version does not know must not hide the reason (the row was empty).
    trial = _trial_dir(
        tmp_path,
        {"error": "final model not found", "failure": "no_model", "field_of_v2": [1]},
    )
    assert _metrics(trial) == {"error": "final model not found", "failure": "no_model"}
    # Written by the agent's side, so a wrong type is ignored, not trusted or crashed on.
    assert _metrics(_trial_dir(tmp_path / "x", {"error": {"nested": 1}})) == {}
    assert _metrics(_trial_dir(tmp_path / "y", [1, 2])) is None


def test_the_table_shows_outcome_and_reason_at_80_columns() -> None:
    record = RunRecord(
        run_id="r",
        command="run",
        benchmark="gsm8k",
        model="smollm2-135m",
        agent="nop",
        environment="local",
        hours=0.1,
        attempts=2,
        task_dir="/runs/r/tasks/t",
        job_dir="/runs/r/jobs/r",
        harbor_version="0",
        posttrainbench_version="0",
        started_at=datetime(2026, 1, 1),
        status="mixed",
        trials=[
            TrialRecord(
                trial_name="gsm8k-smollm2-135m__a1",
                trial_dir="/runs/r/jobs/r/a1",
                outcome="no_model",
                reward=0.0,
                error="final model not found at /logs/artifacts/final_model",
            ),
            TrialRecord(
                trial_name="gsm8k-smollm2-135m__b2",
                trial_dir="/runs/r/jobs/r/b2",
                outcome="agent_error",
                reward=None,
                error=None,
            ),
        ],
    )
    out = io.StringIO()
    print_trials(Console(file=out, width=80), record)
    text = " ".join(out.getvalue().split())
    assert "no_model" in text and "final model not found" in text
    assert "agent_error" in text and "(no reason given)" in text
