"""The re-prompting wrapper without Harbor trials: time left, the decision, the loop.

The loop tests run the wrapper against `ShellEnvironment`, a stand-in for a Harbor
environment that runs each command in a real bash with the sandbox paths (/logs,
/opt/ptb) moved under a temporary directory, so the clock probe and the test agent's
shell lines behave as in a sandbox. Its clock is the machine's, or a frozen one (`now`)
where a test checks the time left to the second.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from datetime import UTC
from pathlib import Path

import pytest
from harbor.environments.base import ExecResult
from harbor.models.agent.context import AgentContext

from posttrainbench.host.agents.reprompt import RepromptConfigError, RepromptingAgent, split_kwargs
from posttrainbench.host.agents.reprompt_policy import (
    RepromptSettings,
    StopReason,
    decide,
    read_records,
)
from posttrainbench.host.agents.time_budget import (
    PtbClock,
    TimeLeft,
    TimeSource,
    format_duration,
    parse_probe_output,
    probe_command,
    read_ptb_clock,
    time_left_from,
)
from posttrainbench.host.agents.usage import add_usage

INSTRUCTION = "Write 'done' to /app/out.txt.\nThen stop."
STOPPING = "tests.reprompt_agents:StoppingAgent"
RESUMING = "tests.reprompt_agents:ResumingStoppingAgent"


class ShellEnvironment:
    """Runs commands in bash, with /logs and /opt/ptb under `root`.

    With `now` (epoch seconds) the sandbox's clock is frozen there: `date +%s` prints it.
    """

    def __init__(self, root: Path, now: int | None = None) -> None:
        self.root = root
        self.now = now
        self.commands: list[str] = []
        self._env: dict[str, str] | None = None
        (root / "logs" / "agent").mkdir(parents=True, exist_ok=True)
        (root / "opt" / "ptb").mkdir(parents=True, exist_ok=True)
        if now is not None:
            fake_bin = root / "fake-bin"
            fake_bin.mkdir()
            date = fake_bin / "date"
            date.write_text(
                f'#!/bin/sh\nif [ "$*" = "+%s" ]; then echo {now}; else exec /bin/date "$@"; fi\n'
            )
            date.chmod(0o755)
            self._env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}

    def time(self) -> float:
        """The sandbox's clock (epoch seconds)."""
        return time.time() if self.now is None else self.now

    def path(self, sandbox_path: str) -> Path:
        return self.root / sandbox_path.lstrip("/")

    async def exec(
        self, command: str, cwd=None, env=None, timeout_sec=None, user=None
    ) -> ExecResult:
        self.commands.append(command)
        local = command.replace("/logs/", f"{self.root}/logs/").replace(
            "/opt/ptb", f"{self.root}/opt/ptb"
        )
        done = subprocess.run(
            ["bash", "-c", local], capture_output=True, text=True, timeout=30, env=self._env
        )
        return ExecResult(stdout=done.stdout, stderr=done.stderr, return_code=done.returncode)


def ptb_task(env: ShellEnvironment, hours: float, elapsed_minutes: float = 0.0) -> None:
    """The two trusted files of a PostTrainBench task: clock stamp and task.json."""
    env.path("/logs/agent/ptb_start_time").write_text(f"{int(env.time() - elapsed_minutes * 60)}\n")
    env.path("/opt/ptb/task.json").write_text(json.dumps({"benchmark": "x", "hours": hours}))


def make_agent(tmp_path: Path, **kwargs) -> RepromptingAgent:
    return RepromptingAgent(logs_dir=tmp_path / "agent", **kwargs)


def rounds(env: ShellEnvironment) -> list[dict]:
    return [
        json.loads(line) for line in env.path("/logs/agent/rounds.txt").read_text().splitlines()
    ]


# --- time left --------------------------------------------------------------------------


def test_probe_output_gives_the_seconds_left() -> None:
    clock, problem = parse_probe_output(
        'now=1000\nstart=400\n@@ptb-task-json@@\n{"hours": 0.5, "x": 1}\n'
    )
    assert problem is None and clock == PtbClock(now_epoch=1000, start_epoch=400, hours=0.5)
    assert clock.seconds_left() == 400 + 1800 - 1000


@pytest.mark.parametrize(
    ("stdout", "problem"),
    [
        ('now=1000\nstart=\n@@ptb-task-json@@\n{"hours": 1}', "no clock stamp"),
        ('now=1000\nstart=abc\n@@ptb-task-json@@\n{"hours": 1}', "epoch seconds"),
        ("now=1000\nstart=900\n@@ptb-task-json@@\n", "no /opt/ptb/task.json"),
        ('now=1000\nstart=900\n@@ptb-task-json@@\n{"hours": 0}', "positive `hours`"),
        ("now=1000\nstart=900\n@@ptb-task-json@@\nnot json", "positive `hours`"),
        ("", "sandbox clock"),
    ],
)
def test_probe_output_without_a_usable_clock(stdout: str, problem: str) -> None:
    clock, reason = parse_probe_output(stdout)
    assert clock is None and problem in reason


def test_the_task_clock_wins_then_budget_minutes_then_unknown() -> None:
    clock = PtbClock(now_epoch=100, start_epoch=100, hours=1)
    assert time_left_from(clock, None, 5, 60) == TimeLeft(seconds=3600, source=TimeSource.PTB_TASK)
    fallback = time_left_from(None, "no stamp", 5, 60)
    assert (fallback.seconds, fallback.source, fallback.detail) == (
        240,
        TimeSource.BUDGET_MINUTES,
        "no stamp",
    )
    unknown = time_left_from(None, "no stamp", None, 60)
    assert (unknown.seconds, unknown.source, unknown.minutes) == (None, TimeSource.UNKNOWN, None)


def test_the_probe_reads_the_sandbox_files(tmp_path: Path) -> None:
    env = ShellEnvironment(tmp_path)
    ptb_task(env, hours=2, elapsed_minutes=30)
    clock, problem = asyncio.run(read_ptb_clock(env))
    assert problem is None and clock is not None
    assert 89 * 60 <= clock.seconds_left() <= 90 * 60 + 1
    assert env.commands == [probe_command()]


def test_a_failing_probe_means_unknown() -> None:
    class Broken:
        async def exec(self, command: str, **kwargs: object) -> ExecResult:
            raise ConnectionError("sandbox gone")

    clock, problem = asyncio.run(read_ptb_clock(Broken()))
    assert clock is None and "ConnectionError" in problem


def test_durations_read_well() -> None:
    assert [format_duration(s) for s in (30, 42 * 60 + 5, 2 * 3600 + 5 * 60, -10)] == [
        "less than a minute",
        "42 min",
        "2 h 05 min",
        "less than a minute",
    ]


# --- the decision -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("done", "minutes", "expected"),
    [
        (0, 31.0, None),  # re-prompt
        (0, 30.0, None),  # exactly the minimum still counts
        (0, 29.9, StopReason.TIME_BELOW_MINIMUM),
        (0, -5.0, StopReason.TIME_BELOW_MINIMUM),
        (3, 500.0, StopReason.MAX_REPROMPTS),
        (0, None, StopReason.BUDGET_UNKNOWN),
    ],
)
def test_decide(done: int, minutes: float | None, expected: StopReason | None) -> None:
    settings = RepromptSettings(inner="nop", min_remaining_minutes=30, max_reprompts=3)
    source = TimeSource.UNKNOWN if minutes is None else TimeSource.PTB_TASK
    left = TimeLeft(seconds=None if minutes is None else minutes * 60, source=source)
    decision = decide(settings, done, left)
    assert decision.reprompt is (expected is None) and decision.reason == expected


def test_settings_are_split_from_the_inner_agents_kwargs() -> None:
    settings, rest = split_kwargs(
        {"inner": "codex", "max_reprompts": 2, "reasoning_effort": "high"}
    )
    assert settings == RepromptSettings(inner="codex", max_reprompts=2)
    assert settings.min_remaining_minutes == 30 and rest == {"reasoning_effort": "high"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs the kwarg `inner`"),
        ({"inner": "no-such-agent"}, "unknown inner agent"),
        ({"inner": "posttrainbench.host.agents.reprompt:RepromptingAgent"}, "wrapper itself"),
        ({"inner": STOPPING, "min_remaining_minutes": -1}, "min_remaining_minutes"),
        ({"inner": STOPPING, "max_reprompts": "many"}, "max_reprompts"),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(RepromptConfigError, match=message):
        make_agent(tmp_path, **kwargs)


def test_preflight_refuses_double_wrapping() -> None:
    with pytest.raises(RepromptConfigError, match="wrapper itself"):
        RepromptingAgent.preflight(
            {"inner": "posttrainbench.host.agents.reprompt:RepromptingAgent"}, {}
        )
    RepromptingAgent.preflight({"inner": STOPPING, "advance_minutes": 1}, {})


# --- the loop ---------------------------------------------------------------------------


def test_reprompts_while_time_remains_then_stops_below_the_minimum(tmp_path: Path) -> None:
    # A frozen sandbox clock: only the agent's advance_minutes moves the time left.
    env = ShellEnvironment(tmp_path / "sandbox", now=1_700_000_000)
    ptb_task(env, hours=1)
    agent = make_agent(
        tmp_path,
        inner=STOPPING,
        min_remaining_minutes=25,
        max_reprompts=10,
        advance_minutes=10,
        tokens_per_round=100,
        cost_per_round=0.25,
    )
    context = AgentContext()
    asyncio.run(agent.setup(env))
    asyncio.run(agent.run(INSTRUCTION, env, context))
    records = read_records(agent.log_path)
    # 50, 40, 30 minutes left after rounds 1-3 (>= 25: continue), 20 after round 4: stop.
    assert [r.action for r in records] == ["reprompt", "reprompt", "reprompt", "stop"]
    assert records[-1].stop_reason is StopReason.TIME_BELOW_MINIMUM
    assert [r.time_left_minutes for r in records] == [50, 40, 30, 20]
    assert all(r.time_source is TimeSource.PTB_TASK for r in records)
    assert [r.prompt for r in records] == ["instruction"] + ["continuation"] * 3
    assert agent.inner.setups == 1 and len(agent.inner.calls) == 4
    # A fresh run (no resume capability) gets the original instruction again.
    seen = rounds(env)
    assert seen[0]["head"] == "Write 'done' to /app/out.txt."
    assert all(r["has_instruction"] and r["method"] == "run" for r in seen)
    assert seen[1]["head"].startswith("You stopped working")
    assert "about 40 min remain" in agent.inner.calls[2][1]
    # Every round's usage is summed into Harbor's context, with the summary.
    assert (context.n_input_tokens, context.n_output_tokens, context.cost_usd) == (400, 40, 1.0)
    assert context.metadata["reprompt"] == {
        "inner_agent": STOPPING,
        "rounds": 4,
        "reprompts": 3,
        "stop_reason": "time_left_below_minimum",
        "log": "reprompt.jsonl",
    }
    assert [r.usage.n_input_tokens for r in records] == [100] * 4
    # Each round's stream files were kept in the sandbox's logs dir.
    assert env.path("/logs/agent/reprompt/round-4/rounds.txt").is_file()


def test_a_resumable_agent_continues_its_session_without_the_instruction(tmp_path: Path) -> None:
    env = ShellEnvironment(tmp_path / "sandbox")
    ptb_task(env, hours=10)
    agent = make_agent(tmp_path, inner=RESUMING, min_remaining_minutes=1, max_reprompts=2)
    asyncio.run(agent.run(INSTRUCTION, env, AgentContext()))
    assert [m for m, _ in agent.inner.calls] == ["run", "resume", "resume"]
    continuation = agent.inner.calls[1][1]
    assert INSTRUCTION not in continuation and "first message of this session" in continuation
    assert "final_model/" in continuation and "continuation 1 of at most 2" in continuation
    records = read_records(agent.log_path)
    assert [r.resumed_session for r in records] == [False, True, True]
    assert records[-1].stop_reason is StopReason.MAX_REPROMPTS and records[-1].reprompts_done == 2


def test_budget_minutes_count_from_the_wrappers_start_without_a_task_clock(tmp_path: Path) -> None:
    env = ShellEnvironment(tmp_path / "sandbox")  # no stamp, no task.json
    ticks = iter([0.0, 600.0, 1200.0, 1800.0])  # start, then 10 minutes per round
    agent = make_agent(
        tmp_path,
        inner=STOPPING,
        min_remaining_minutes=15,
        budget_minutes=40,
        clock=lambda: next(ticks),
    )
    asyncio.run(agent.run(INSTRUCTION, env, AgentContext()))
    records = read_records(agent.log_path)
    assert [round(r.time_left_minutes) for r in records] == [30, 20, 10]
    assert [r.action for r in records] == ["reprompt", "reprompt", "stop"]
    assert (
        records[0].time_source is TimeSource.BUDGET_MINUTES
        and "no clock stamp" in records[0].time_detail
    )
    assert records[-1].stop_reason is StopReason.TIME_BELOW_MINIMUM


def test_no_reprompt_when_the_budget_is_unknown(tmp_path: Path) -> None:
    env = ShellEnvironment(tmp_path / "sandbox")
    agent = make_agent(tmp_path, inner=STOPPING)
    context = AgentContext()
    asyncio.run(agent.run(INSTRUCTION, env, context))
    (record,) = read_records(agent.log_path)
    assert (record.action, record.stop_reason, record.time_source) == (
        "stop",
        StopReason.BUDGET_UNKNOWN,
        TimeSource.UNKNOWN,
    )
    assert "no clock stamp" in record.time_detail
    # No round reported usage: the context stays empty for Harbor's post-run parsing...
    assert context.is_empty()
    # ...after which the wrapper adds its summary.
    agent.populate_context_post_run(context)
    assert context.metadata["reprompt"]["stop_reason"] == "budget_unknown"


def test_an_inner_error_is_logged_and_raised(tmp_path: Path) -> None:
    env = ShellEnvironment(tmp_path / "sandbox")
    ptb_task(env, hours=5)
    agent = make_agent(
        tmp_path,
        inner="tests.reprompt_agents:FailingAgent",
        min_remaining_minutes=1,
        tokens_per_round=7,
    )
    context = AgentContext()
    with pytest.raises(RuntimeError, match="crashed"):
        asyncio.run(agent.run(INSTRUCTION, env, context))
    records = read_records(agent.log_path)
    assert [r.action for r in records] == ["reprompt", "stop"]
    assert (records[-1].stop_reason, records[-1].error) == (StopReason.INNER_ERROR, "RuntimeError")
    assert (
        context.n_input_tokens == 14
        and context.metadata["reprompt"]["stop_reason"] == "inner_agent_error"
    )


def test_the_wrapper_answers_for_its_inner_agent(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, inner=RESUMING, extra_env={"SOME_KEY": "v"})
    assert agent.extra_env == {"SOME_KEY": "v"} and agent.version() == "1.0.0"
    assert agent.to_agent_info().name == "ptb-test-stopping+reprompt"
    assert agent.capabilities.resume is False  # the wrapper itself offers no session resume
    assert agent.inner.logs_dir == agent.logs_dir


def test_usage_sums_treat_missing_as_not_reported() -> None:
    total = AgentContext()
    add_usage(total, AgentContext(n_input_tokens=5, cost_usd=None))
    add_usage(total, AgentContext(n_input_tokens=None, cost_usd=0.5))
    assert (total.n_input_tokens, total.n_output_tokens, total.cost_usd) == (5, None, 0.5)


# --- the AgentConfig the CLI builds -----------------------------------------------------


def test_agent_configs_plain_and_wrapped() -> None:
    from posttrainbench.host.agents.agent_config import REPROMPT_IMPORT_PATH, build_agent_config

    env = {"ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}"}
    plain = build_agent_config("claude-code", "anthropic/claude-opus-4-1", env)
    assert (plain.name, plain.import_path, plain.kwargs, plain.env) == (
        "claude-code",
        None,
        {},
        env,
    )
    custom = build_agent_config(STOPPING, None)
    assert (custom.name, custom.import_path) == (None, STOPPING)
    wrapped = build_agent_config(
        "claude-code", "anthropic/claude-opus-4-1", env, reprompt_min_minutes=45
    )
    assert wrapped.import_path == REPROMPT_IMPORT_PATH and wrapped.name is None
    assert wrapped.kwargs == {
        "inner": "claude-code",
        "min_remaining_minutes": 45.0,
        "max_reprompts": 10,
    }
    assert (wrapped.model_name, wrapped.env) == ("anthropic/claude-opus-4-1", env)
    glm = build_agent_config(
        "opencode",
        "zai/glm-4.6",
        {"ZHIPU_API_KEY": "${ZHIPU_API_KEY}"},
        key_vars=["ZHIPU_API_KEY"],
        reprompt_min_minutes=30,
        max_reprompts=3,
    )
    assert glm.kwargs["inner"] == "opencode" and glm.kwargs["max_reprompts"] == 3
    assert (
        glm.kwargs["opencode_config"]["provider"]["zai"]["options"]["apiKey"]
        == "{env:ZHIPU_API_KEY}"
    )
    with pytest.raises(RepromptConfigError, match="wrapper itself"):
        build_agent_config(REPROMPT_IMPORT_PATH, None, reprompt_min_minutes=30)


def test_round_log_is_never_written_through_a_link(tmp_path: Path) -> None:
    """A link named like the log (planted where trial files land) is refused, not followed."""
    from datetime import datetime

    from posttrainbench.host.agents.reprompt_policy import RoundRecord, append_record

    canary = tmp_path / "host-file"
    canary.write_text("host\n")
    log = tmp_path / "agent" / "reprompt.jsonl"
    log.parent.mkdir()
    log.symlink_to(canary)
    now = datetime.now(UTC)
    record = RoundRecord(
        round=1,
        inner_agent="x",
        prompt="instruction",
        resumed_session=False,
        started_at=now,
        finished_at=now,
        duration_sec=0.0,
        min_remaining_minutes=1.0,
        reprompts_done=0,
        max_reprompts=1,
        action="stop",
    )
    with pytest.raises(OSError):
        append_record(log, record)
    assert canary.read_text() == "host\n"
    log.unlink()
    append_record(log, record)
    assert [r.round for r in read_records(log)] == [1]
