"""The re-prompting wrapper in real Harbor trials on the local sandbox.

A tiny task carries PostTrainBench's two clock files (the healthcheck writes
`/logs/agent/ptb_start_time`, `/opt/ptb/task.json` says `hours`); the inner agent
(`tests.reprompt_agents:StoppingAgent`) stops at once every time, appends a line to
`/logs/agent/rounds.txt` and moves the clock stamp back by 10 minutes per round, so
the time left crosses the minimum after a known number of rounds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from posttrainbench.host.agents.reprompt_policy import StopReason, read_records

pytestmark = pytest.mark.slow

ENV_IMPORT_PATH = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
WRAPPER = "posttrainbench.host.agents.reprompt:RepromptingAgent"

TASK_TOML = """\
version = "1.0"

[agent]
timeout_sec = 300.0

[verifier]
timeout_sec = 60.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024

[environment.healthcheck]
command = "bash /opt/ptb/start.sh"
retries = 1
interval_sec = 1.0
timeout_sec = 30.0
"""

START_SH = """\
#!/usr/bin/env bash
mkdir -p /logs/agent
[ -s /logs/agent/ptb_start_time ] || date +%s > /logs/agent/ptb_start_time
"""


def write_task(root: Path, hours: float) -> Path:
    """A task with a PostTrainBench-style clock and a `hours` budget."""
    task = root / "reprompt-task"
    (task / "environment" / "ptb").mkdir(parents=True)
    (task / "environment" / "workspace").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "environment" / "requirements.txt").write_text("")
    (task / "environment" / "ptb" / "start.sh").write_text(START_SH)
    (task / "environment" / "ptb" / "task.json").write_text(
        json.dumps({"benchmark": "none", "hours": hours})
    )
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text("Write 'done' to /app/out.txt.\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "tests" / "test.sh").chmod(0o755)
    return task


def test_wrapper_reprompts_while_time_remains_and_stops_by_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    inner = "tests.reprompt_agents:StoppingAgent"
    # 60-minute budget, 10 minutes "pass" per round: 50, 40, 30 left (>= 25) then 20 (< 25).
    time_limited = AgentConfig(
        import_path=WRAPPER,
        kwargs={
            "inner": inner,
            "min_remaining_minutes": 25,
            "max_reprompts": 10,
            "advance_minutes": 10,
            "tokens_per_round": 1000,
            "cost_per_round": 0.5,
        },
    )
    # Plenty of time, but at most two re-prompts.
    count_limited = AgentConfig(
        import_path=WRAPPER, kwargs={"inner": inner, "min_remaining_minutes": 1, "max_reprompts": 2}
    )
    config = JobConfig(
        job_name="reprompt",
        jobs_dir=tmp_path / "jobs",
        n_concurrent_trials=2,
        quiet=True,
        agents=[time_limited, count_limited],
        tasks=[TaskConfig(path=write_task(tmp_path, hours=1.0))],
        environment=EnvironmentConfig(import_path=ENV_IMPORT_PATH),
    )

    async def run() -> object:
        return await (await Job.create(config)).run()

    results = asyncio.run(run()).trial_results  # type: ignore[attr-defined]
    assert len(results) == 2
    by_limit = {}
    for trial in results:
        assert trial.exception_info is None, trial.exception_info
        agent_dir = Path(trial.trial_uri.removeprefix("file://")) / "agent"
        by_limit[trial.config.agent.kwargs["max_reprompts"]] = (trial, agent_dir)

    trial, agent_dir = by_limit[10]
    records = read_records(agent_dir / "reprompt.jsonl")
    assert [r.action for r in records] == ["reprompt", "reprompt", "reprompt", "stop"]
    assert records[-1].stop_reason is StopReason.TIME_BELOW_MINIMUM
    assert [round(r.time_left_minutes) for r in records] == [50, 40, 30, 20]
    lines = [json.loads(x) for x in (agent_dir / "rounds.txt").read_text().splitlines()]
    assert len(lines) == 4 and lines[0]["head"] == "Write 'done' to /app/out.txt."
    assert all(line["head"].startswith("You stopped working") for line in lines[1:])
    assert (agent_dir / "setups.txt").read_text().split() == ["setup"]  # installed once
    assert (agent_dir / "reprompt" / "round-3" / "rounds.txt").is_file()
    # Harbor recorded the summed usage of the four rounds, and the wrapped agent's name.
    usage = trial.agent_result
    assert (usage.n_input_tokens, usage.n_output_tokens, usage.cost_usd) == (4000, 400, 2.0)
    assert usage.metadata["reprompt"]["stop_reason"] == "time_left_below_minimum"
    assert trial.agent_info.name == "ptb-test-stopping+reprompt"

    trial, agent_dir = by_limit[2]
    records = read_records(agent_dir / "reprompt.jsonl")
    assert [r.action for r in records] == ["reprompt", "reprompt", "stop"]
    assert records[-1].stop_reason is StopReason.MAX_REPROMPTS
    assert all(r.time_left_minutes > 55 for r in records)
    assert len((agent_dir / "rounds.txt").read_text().splitlines()) == 3
