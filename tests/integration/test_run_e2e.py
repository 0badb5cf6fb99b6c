"""End-to-end runs through Harbor on the local sandbox, as the README shows them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.host.runner.record import RunRecord
from posttrainbench.task.schemas import Metrics
from tests.helpers import run_ptb
from tests.ptb_collect_checks import check_ptb_collect
from tests.rescore_checks import check_rescore
from tests.results_fixtures import stored_file

pytestmark = pytest.mark.slow


def _only_run(runs_dir: Path) -> RunRecord:
    records = list(runs_dir.glob("*/run.json"))
    assert len(records) == 1, records
    return RunRecord.read(records[0])


def test_run_without_final_model_scores_zero_with_reason(tmp_path: Path) -> None:
    """`ptb run` with Harbor's do-nothing agent: the verifier records why the reward is 0."""
    result = run_ptb(
        "run",
        "--benchmark",
        "bfcl",
        "--base-model",
        "smollm2-135m",
        "--agent",
        "nop",
        "--env",
        "local",
        "--hours",
        "0.5",
        "--runs-dir",
        str(tmp_path),
        "--json",
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = _only_run(tmp_path)
    # --json: stdout is the run record alone (Harbor's progress went to stderr).
    printed = RunRecord.model_validate_json(result.stdout)
    assert printed.run_id == record.run_id and printed.status == record.status
    # No model is the trial's outcome in run.json as in the results store (issue 19).
    assert record.status == "no_model"
    (trial,) = record.trials
    assert trial.reward == 0.0 and trial.outcome == "no_model" and "final_model" in trial.error
    metrics = Metrics.load(trial.metrics_path)
    assert metrics.error and "final_model" in metrics.error
    trial_dir = Path(trial.trial_dir)
    # The agent's clock was started by the healthcheck and the monitor (root's, logging with
    # the artifacts) wrote a sample, and its last one after the agent.
    assert (trial_dir / "agent" / "ptb_start_time").read_text().strip().isdigit()
    monitor_log = trial_dir / "artifacts" / "logs" / "artifacts" / "system_monitor.log"
    assert "(after the agent)" in monitor_log.read_text()
    # The judges ran in the verifier. `nop` leaves no model and no trace: the judges
    # that need them say they cannot decide, rather than clearing the run.
    verdicts = _judgements(trial_dir)
    assert verdicts["contamination"].flagged is False
    assert (
        verdicts["disallowed_model"].flagged is None
        and "final_model" in verdicts["disallowed_model"].justification
    )
    for judge in ("api_usage", "benchmark_lookup", "anomaly"):
        assert verdicts[judge].flagged is None and "trace" in verdicts[judge].justification
    # Exported, the run is an error (no model to score), not a score of 0, so the
    # leaderboard falls back to the base model rather than ranking a zero.
    exported = run_ptb("results", "export", str(tmp_path), "-o", str(tmp_path / "results"))
    assert exported.returncode == 0 and "1 added" in exported.stdout, (
        exported.stdout + exported.stderr
    )
    (run,) = _exported(tmp_path / "results")
    assert run.status == "no_model" and "final model not found" in run.error and run.flagged is None
    assert (run.agent, run.benchmark, run.base_model, run.hours) == (
        "nop",
        "bfcl",
        "smollm2-135m",
        0.5,
    )
    # PostTrainBench's own collect.py on this real trial agrees with our leaderboard.
    cells = check_ptb_collect(tmp_path / "results", tmp_path / "ptb", {"nop": "nop__0.5h"})
    assert cells["nop__0.5h"] == {("bfcl", "SmolLM2-135M-Instruct"): ""}  # no baseline there


def _exported(results: Path) -> list:
    from posttrainbench.host.results.store import ResultsStore

    records, skipped = ResultsStore.open(results, create=False).load()
    assert not skipped, skipped
    return records


def _judgements(trial_dir: Path) -> dict:
    from posttrainbench.core.verdict import JUDGE_IDS, Judgement

    verifier = trial_dir / "verifier"
    return {j: Judgement.read(verifier / Judgement.filename(j)) for j in JUDGE_IDS}


def test_demo(tmp_path: Path) -> None:
    """`ptb demo` exactly as the README shows it: the post-trained model beats the base."""
    result = run_ptb("demo", "--runs-dir", str(tmp_path), timeout=3000)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    record = _only_run(tmp_path)
    (trial,) = record.trials
    metrics = Metrics.load(trial.metrics_path)
    assert metrics.base_model is not None and metrics.base_model.n == metrics.n
    assert metrics.n >= 50
    # Measurably higher: more than two standard errors of the difference apart.
    gap = metrics.accuracy - metrics.base_model.accuracy
    assert gap > 2 * (metrics.stderr**2 + metrics.base_model.stderr**2) ** 0.5, metrics
    assert re.search(r"post-trained \(final_model\)\s*│\s*\d+\.\d%", output), output
    assert f"(n={metrics.n})" in output and "reference fine-tune: 20 steps" in output, output
    # Not silent while it trains (issue 38 item 5): the fine-tune's steps as they happen,
    # and each score's standard error in the table, which starts a line of its own.
    assert re.search(r"reference fine-tune: step 2 loss [\d.]+ \d+s", output), output
    assert re.search(r"^┏", output, re.MULTILINE) and "± stderr" in output, output
    # Each question's verdict for the run page, as many right as metrics.json counts.
    samples = (Path(trial.trial_dir) / "verifier" / "samples.jsonl").read_text().splitlines()
    assert len(samples) == metrics.n
    assert sum(json.loads(line)["score"] for line in samples) == metrics.n_correct
    artifacts = Path(trial.trial_dir) / "artifacts"
    manifest = json.loads(next(artifacts.rglob("code_snapshot/MANIFEST.json")).read_text())
    assert manifest["kept"], manifest
    assert (
        json.loads((Path(trial.trial_dir) / "verifier" / "reward.json").read_text())["reward"]
        == metrics.accuracy
    )
    # The judges in the verifier: an honest fine-tune of the base on generated data.
    verdicts = _judgements(Path(trial.trial_dir))
    assert verdicts["disallowed_model"].flagged is False, verdicts["disallowed_model"]
    assert verdicts["contamination"].flagged is False, verdicts["contamination"]
    # The host re-judge of the finished trial (issue 38 item 3): no verdict weaker than
    # the verifier's (it finds the base model itself, or keeps the verifier's).
    rejudged = run_ptb("judge", trial.trial_dir, "--json", timeout=600)
    assert rejudged.returncode == 0, rejudged.stderr[-2000:]
    host = {j["judge"]: j for j in json.loads(rejudged.stdout)}
    for judge, verdict in verdicts.items():
        if verdict.flagged is not None:
            assert host[judge]["flagged"] == verdict.flagged, (judge, host[judge])
    # The results pipeline on the real trial: export, leaderboard, no flagged runs.
    exported = run_ptb("results", "export", str(tmp_path), "-o", str(tmp_path / "results"))
    assert exported.returncode == 0 and "1 added" in exported.stdout, (
        exported.stdout + exported.stderr
    )
    (run,) = _exported(tmp_path / "results")
    assert (run.agent, run.benchmark, run.base_model, run.status) == (
        "oracle",
        "bfcl",
        "smollm2-135m",
        "completed",
    )
    assert run.score == metrics.accuracy and run.flagged is False and len(run.verdicts) == 5
    assert run.time.budget_hours == 1.0 and 0 < run.time.agent_hours < 1.0
    assert stored_file(tmp_path / "results", run, "snapshot/MANIFEST.json")
    collected = run_ptb("results", "collect", str(tmp_path / "results"))
    assert collected.returncode == 0, collected.stderr
    board = json.loads((tmp_path / "results" / "leaderboard" / "leaderboard.json").read_text())
    (cell,) = board["cells"]
    assert cell["source"] == "run" and cell["score"] == metrics.accuracy
    assert (
        cell["baseline"] == metrics.base_model.accuracy
        and "measured by the verifier" in cell["baseline_source"]
    )
    assert "0 of 1 runs flagged" in run_ptb("results", "flagged", str(tmp_path / "results")).stdout
    cells = check_ptb_collect(tmp_path / "results", tmp_path / "ptb", {"oracle": "oracle__1h"})
    assert float(cells["oracle__1h"][("bfcl", "SmolLM2-135M-Instruct")]) == metrics.accuracy


def test_harbor_cli_runs_a_generated_task_on_the_local_sandbox(tmp_path: Path) -> None:
    """The README's `ptb tasks generate` smoke task, then `harbor run` on the local sandbox."""
    compiled = run_ptb(
        "tasks",
        "generate",
        "-b",
        "bfcl",
        "-M",
        "smollm2-135m",
        "--hours",
        "0.2",
        "--cpus",
        "2",
        "--memory-gb",
        "8",
        "--eval-limit",
        "2",
        "--train-steps",
        "2",
        "-o",
        str(tmp_path / "tasks"),
    )
    assert compiled.returncode == 0, compiled.stderr
    harbor = Path(sys.executable).with_name("harbor")
    result = subprocess.run(
        [
            str(harbor),
            "run",
            "-p",
            str(tmp_path / "tasks" / "bfcl-smollm2-135m"),
            "-a",
            "oracle",
            "--env",
            "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment",
            "-o",
            str(tmp_path / "jobs"),
            "-y",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "HARBOR_TELEMETRY": "0"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (trial_result,) = list((tmp_path / "jobs").glob("*/*/result.json"))
    trial = json.loads(trial_result.read_text())
    assert trial.get("exception_info") is None, trial["exception_info"]
    metrics = Metrics.load(trial_result.parent / "verifier" / "metrics.json")
    assert metrics.n == 2 and metrics.error is None, metrics
    # The verifier scored the model that the oracle trained, handed over by the collect hook.
    assert next((trial_result.parent / "artifacts").rglob("final_model/config.json"))
    # A plain Harbor jobs dir exports too: the verifier left the task spec beside its results.
    exported = run_ptb(
        "results",
        "export",
        str(tmp_path / "jobs"),
        "-o",
        str(tmp_path / "results"),
        "--with-final-model",
    )
    assert exported.returncode == 0 and "1 added" in exported.stdout, (
        exported.stdout + exported.stderr
    )
    (run,) = _exported(tmp_path / "results")
    assert (run.benchmark, run.base_model, run.hours, run.score) == (
        "bfcl",
        "smollm2-135m",
        0.2,
        metrics.accuracy,
    )
    assert run.task_version and run.task_version.startswith("tv-") and run.final_model_dir
    check_rescore(tmp_path, run)
