"""`ptb sweep status` tells a live runner from a killed one, says how to resume, and keeps
every column at 80 columns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from posttrainbench.host.sweep.plan import job_name_of, open_sweep_dir
from posttrainbench.host.sweep.spec import SweepSpec, parse_agents
from posttrainbench.host.sweep.status import sweep_status
from tests.helpers import run_ptb
from tests.results_fixtures import TrialSpec, write_trial

COMMAND = ["ptb", "sweep", "-b", "gsm8k", "-M", "qwen3-1.7b", "-a", "claude-code:x/y"]

# The runner's own lock and state files, written by the code `ptb sweep` runs
# (sweep_lock), held by a process that then stays busy, as a runner does during its job.
RUNNER = """
import sys, time
from pathlib import Path
from posttrainbench.host.sweep.runner import sweep_lock
with sweep_lock(Path(sys.argv[1]), sys.argv[2:]):
    print("ready", flush=True)
    time.sleep(120)
"""


def _sweep_with_an_unfinished_trial(root: Path) -> Path:
    sweep = root / "sweep"
    spec = SweepSpec(
        benchmarks=["gsm8k"],
        models=["qwen3-1.7b"],
        agents=parse_agents(
            "claude-code:anthropic/claude-opus-4-1-with-a-long-name,codex:openai/gpt-5"
        ),
    )
    open_sweep_dir(sweep, spec)
    job = sweep / "jobs" / job_name_of(sweep)
    job.mkdir(parents=True)
    cc = dict(agent="claude-code", agent_model="anthropic/claude-opus-4-1-with-a-long-name")
    write_trial(job, TrialSpec(**cc, finished=False))
    return sweep


def test_a_killed_runner_is_seen_and_the_resume_command_named(tmp_path: Path) -> None:
    sweep = _sweep_with_an_unfinished_trial(tmp_path)
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(sweep), *COMMAND],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == "ready"
        alive = sweep_status(sweep)
        assert alive.runner == "running" and alive.runner_pid == runner.pid
        assert [a.running for a in alive.agents] == [1, 0] and alive.resume_command is None
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)

    dead = sweep_status(sweep)
    assert dead.runner == "stopped" and dead.runner_pid == runner.pid
    claude = dead.agents[0]
    assert (claude.running, claude.interrupted, claude.pending) == (0, 1, 0)
    assert dead.resume_command == f"cd {tmp_path} && {' '.join(COMMAND)}"

    shown = run_ptb("sweep", "status", str(sweep), env={"COLUMNS": "80"})
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    out = shown.stdout
    assert "running 1" not in out and "runner: running" not in out
    assert "not running" in out and "1 trial(s) were interrupted" in out
    assert f"resume with: cd {tmp_path} && {' '.join(COMMAND)}" in " ".join(out.split())
    # Every column is there at 80 columns, each number whole; agents are named in a legend.
    table = out.splitlines()
    assert all(len(line) <= 80 for line in table[: table.index(" #1  " + claude.agent)])
    for header in ("scored", "model", "errored", "stopped", "pending", "cost", "tokens", "GPU"):
        assert header in out, (header, out)
    assert f"#1  {claude.agent}" in out and "#2  codex:openai/gpt-5" in out

    as_json = json.loads(run_ptb("sweep", "status", str(sweep), "--json").stdout)
    assert as_json["runner"] == "stopped" and as_json["agents"][0]["interrupted"] == 1


def test_a_wide_status_names_agents_and_a_sweep_without_runner_record(tmp_path: Path) -> None:
    sweep = _sweep_with_an_unfinished_trial(tmp_path)
    shown = run_ptb("sweep", "status", str(sweep), env={"COLUMNS": "160"})
    assert "claude-code:anthropic/claude-opus-4-1-with-a-long-name" in shown.stdout
    assert "#1" not in shown.stdout
    # No runner ever wrote runner.json: the hint says to run the sweep with its settings.
    assert "resume with: ptb sweep ... -o" in " ".join(shown.stdout.split())
