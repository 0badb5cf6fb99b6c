"""A real sweep on the local sandbox: run, resume (nothing twice), retry an errored trial,
and refuse a second runner while the first one runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posttrainbench.host.envs.instance_fs import release_stale_mounts, stale_ptb_mounts
from tests.helpers import REPO, run_ptb

pytestmark = pytest.mark.slow

ARGS = (
    "sweep",
    "-b",
    "bfcl",
    "-M",
    "smollm2-135m",
    "-a",
    "nop",
    "--n-attempts",
    "2",
    "--n-concurrent",
    "2",
    "--hours",
    "0.1",
    "--cpus",
    "2",
    "--memory-gb",
    "8",
    "--eval-limit",
    "2",
    "--name",
    "s",
)


def _trials(sweep: Path) -> list[Path]:
    # The job is named after the sweep, so its trials carry the sweep's name into results.
    return sorted(p for p in (sweep / "jobs" / sweep.name).iterdir() if p.is_dir())


def test_sweep_runs_resumes_and_retries_errored_trials(tmp_path: Path) -> None:
    sweep = tmp_path / "ptb-sweeps" / "s"
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "PYTHONPATH": str(REPO / "src")}
    first = subprocess.Popen(
        [sys.executable, "-c", "from posttrainbench.host.cli.app import main; main()", *ARGS],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # While it runs, a second runner is refused: it would start duplicates of running trials.
    deadline = time.monotonic() + 300
    while not (sweep / "jobs").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
    second = run_ptb(*ARGS, cwd=tmp_path)
    out, err = first.communicate(timeout=1800)
    assert first.returncode == 0, out[-3000:] + err[-3000:]
    assert second.returncode == 2 and "already running" in second.stderr, second.stderr
    trials = _trials(sweep)
    assert len(trials) == 2 and all((t / "result.json").is_file() for t in trials)
    status = json.loads(run_ptb("sweep", "status", str(sweep), "--json").stdout)
    (nop,) = status["agents"]
    # nop leaves no model: each trial is scored 0 by the verifier, an outcome, not an error
    # (and never retried: it is the agent's result).
    assert (nop["no_model"], nop["errored"], nop["pending"], nop["running"]) == (2, 0, 0, 0)

    # The same command again: Harbor resumes the job and runs nothing twice.
    again = run_ptb(*ARGS, cwd=tmp_path, timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _trials(sweep) == trials

    # An infrastructure error on one trial: the retry policy moves it aside and runs it again.
    victim = trials[0]
    result = json.loads((victim / "result.json").read_text())
    result["exception_info"] = {
        "exception_type": "EnvironmentStartTimeoutError",
        "exception_message": "slow",
        "exception_traceback": "",
        "occurred_at": result["finished_at"],
    }
    (victim / "result.json").write_text(json.dumps(result))
    retried = run_ptb(*ARGS, cwd=tmp_path, timeout=1800)
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert "1 errored trial(s) run again" in retried.stdout
    assert (sweep / "retired" / victim.name / "result.json").is_file()
    now = _trials(sweep)
    assert len(now) == 2 and trials[1] in now and victim not in now
    # And the whole sweep exports into the results store like any Harbor job.
    exported = run_ptb("results", "export", str(sweep / "jobs"), "-o", str(tmp_path / "results"))
    assert exported.returncode == 0 and "2 added" in exported.stdout, (
        exported.stdout + exported.stderr
    )
    from posttrainbench.host.results.store import ResultsStore

    records, _ = ResultsStore.open(tmp_path / "results", create=False).load()
    assert {r.job_name for r in records} == {"s"}  # the sweep's own name, for provenance


def test_a_sweep_killed_mid_trial_resumes_with_the_same_command(tmp_path: Path) -> None:
    """kill -9 of the runner leaves its instance's overlay mounted; the resume unmounts it,
    so Harbor can remove the dead trial's dir and run the trial again (issue 38, item 1)."""
    args = [*ARGS[: ARGS.index("--n-attempts")], "--hours", "0.1", "--eval-limit", "1"]
    args += ["--cpus", "2", "--memory-gb", "8", "--name", "k"]
    sweep = tmp_path / "ptb-sweeps" / "k"
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "PYTHONPATH": str(REPO / "src")}
    runner = subprocess.Popen(
        [sys.executable, "-c", "from posttrainbench.host.cli.app import main; main()", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _kill_and_resume(tmp_path, runner, sweep, args)
    finally:  # never leave a runner or a mount behind, passed or failed
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=60)
        release_stale_mounts(tmp_path)


def _kill_and_resume(tmp_path: Path, runner: subprocess.Popen, sweep: Path, args: list) -> None:
    deadline = time.monotonic() + 900
    while not stale_ptb_mounts(tmp_path) and runner.poll() is None:
        assert time.monotonic() < deadline, "the trial's sandbox never started"
        time.sleep(0.5)
    assert runner.poll() is None, "the sweep ended before it could be killed"
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=60)
    assert stale_ptb_mounts(tmp_path), "kill -9 should leave the overlay mounted"
    status = json.loads(run_ptb("sweep", "status", str(sweep), "--json").stdout)
    assert status["resume_command"], status

    resumed = run_ptb(*args, cwd=tmp_path, timeout=1800)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "unmounted a dead run's sandbox overlay" in resumed.stderr
    (trial,) = _trials(sweep)
    assert (trial / "result.json").is_file()
    assert not stale_ptb_mounts(tmp_path)
