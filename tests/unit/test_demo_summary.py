"""`ptb demo`'s summary (a real n, the fine-tune's steps) and the verifier's live progress as the host reads it."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime
from pathlib import Path

from typer.testing import CliRunner

from posttrainbench.host.cli.app import app
from posttrainbench.host.runner import demo
from posttrainbench.host.runner.demo import TRAINING_SUMMARY_PATH, summarize
from posttrainbench.host.runner.record import RunRecord, TrialRecord
from posttrainbench.host.runner.verifier_progress import read_verifier_progress, watch_verifier
from posttrainbench.task.schemas import BaseScore, Metrics, VerifierProgress


def _record(tmp_path: Path, metrics: Metrics | None) -> RunRecord:
    trial_dir = tmp_path / "jobs" / "run" / "bfcl__abc"
    trial_dir.mkdir(parents=True)
    metrics_path = metrics.dump(trial_dir / "metrics.json") if metrics else None
    summary = trial_dir / TRAINING_SUMMARY_PATH
    summary.parent.mkdir(parents=True)
    summary.write_text(
        json.dumps({"steps": 7, "steps_planned": 20, "stopped_early": True, "train_seconds": 90.0})
    )
    return RunRecord(
        run_id="run",
        command="demo",
        benchmark="bfcl",
        model="smollm2-135m",
        agent="oracle",
        environment="local",
        hours=1.0,
        attempts=1,
        task_dir=str(tmp_path),
        job_dir=str(tmp_path / "jobs"),
        harbor_version="0",
        posttrainbench_version="0",
        started_at=datetime.now(),
        trials=[
            TrialRecord(
                trial_name="bfcl__abc",
                trial_dir=str(trial_dir),
                metrics_path=str(metrics_path) if metrics_path else None,
            )
        ],
    )


def test_a_trial_whose_model_got_no_score_still_reports_n(tmp_path):
    # What the busy machine gave: the final model failed (n=0), the base model was scored.
    failed = Metrics(
        benchmark="bfcl",
        model_path="/m",
        accuracy=0.0,
        stderr=0.0,
        n=0,
        n_correct=0,
        error="GenerationFailed: ...",
        base_model=BaseScore(model_path="/b", accuracy=0.1, stderr=0.0, n=50, n_correct=5),
    )
    result = summarize(_record(tmp_path, failed), 60.0, limit=50)
    assert result.n == 50 and result.base_score == 0.1 and result.error
    assert result.training.steps == 7 and result.training.stopped_early
    no_metrics = summarize(_record(tmp_path / "other", None), 60.0, limit=12)
    assert no_metrics.n == 12 and no_metrics.final_score is None


def test_the_demo_table_prints_n_and_warns_about_a_short_fine_tune(tmp_path, monkeypatch):
    scored = Metrics(
        benchmark="bfcl",
        model_path="/m",
        accuracy=0.36,
        stderr=0.07,
        n=50,
        n_correct=18,
        base_model=BaseScore(model_path="/b", accuracy=0.0, stderr=0.0, n=50, n_correct=0),
    )
    record = _record(tmp_path, scored)
    seen = []

    async def fake_run_demo(settings, on_progress=None, on_agent_line=None):
        on_agent_line("Loading weights: 100%")  # not a training line: not shown
        on_agent_line("step 2 loss 0.9123 31s")
        on_progress(
            VerifierProgress(
                phase="final_model",
                done=20,
                total=50,
                attempt=1,
                max_new_tokens=96,
                elapsed_s=30.0,
                questions_per_min=40.0,
            )
        )
        seen.append(settings)
        return summarize(record, 300.0, settings.limit)

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    monkeypatch.setattr("posttrainbench.host.cli.demo_cmd.check_local_sandbox", lambda: None)
    result = CliRunner().invoke(app, ["demo", "--runs-dir", str(tmp_path), "--train-steps", "20"])
    assert result.exit_code == 0, result.output
    assert "(n=50)" in result.output and "n=?" not in result.output
    assert (
        "36.0%" in result.output and "7 steps" in result.output and "7 of 20 steps" in result.output
    )
    assert "questions/min" in result.output and seen[0].train_steps == 20
    assert "reference fine-tune: step 2 loss 0.9123 31s" in result.output
    assert "Loading weights" not in result.output
    assert "± stderr" in result.output and "7.0%" in result.output  # the final score's stderr


def _progress_file(path: Path, done: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        VerifierProgress(
            phase="base_model",
            done=done,
            total=50,
            attempt=1,
            max_new_tokens=96,
            elapsed_s=1.0,
            questions_per_min=3.0,
        ).model_dump_json()
    )


def test_progress_is_read_from_the_verifier_instance_without_following_links(tmp_path):
    job = tmp_path / "job"
    trial = job / "bfcl__abc"
    assert read_verifier_progress(job) is None  # no job dir yet
    verifier_logs = (
        trial / "sandbox" / "bfcl__abc__verifier__final" / "rootfs" / "logs" / "verifier"
    )
    _progress_file(verifier_logs / "progress.json", done=12)
    # The agent's own instance has a /logs/verifier too: never read.
    _progress_file(
        trial / "sandbox" / "bfcl__abc__env" / "rootfs" / "logs" / "verifier" / "progress.json",
        done=49,
    )
    state = read_verifier_progress(job)
    assert state is not None and (state.phase, state.done, state.total) == ("base_model", 12, 50)
    # A link where the file was (or above it) is refused, not followed; oversized files too.
    secret = tmp_path / "secret.json"
    _progress_file(secret, done=3)
    (verifier_logs / "progress.json").unlink()
    os.symlink(secret, verifier_logs / "progress.json")
    assert read_verifier_progress(job) is None
    (verifier_logs / "progress.json").unlink()
    (verifier_logs / "progress.json").write_text(" " * 10_000)
    assert read_verifier_progress(job) is None


def test_watch_reports_each_new_state_until_cancelled(tmp_path):
    job = tmp_path / "job"
    path = job / "t" / "verifier" / "progress.json"  # where Docker mounts the verifier's logs
    _progress_file(path, done=1)
    seen: list[int] = []

    async def scenario():
        task = asyncio.create_task(watch_verifier(job, lambda s: seen.append(s.done), poll_s=0.01))
        await asyncio.sleep(0.1)
        _progress_file(path, done=2)
        await asyncio.sleep(0.1)
        task.cancel()

    asyncio.run(scenario())
    assert seen == [1, 2]
