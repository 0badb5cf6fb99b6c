"""The real agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode) end to end, offline:
each runs in a real trial of the demo task on the local sandbox against the scripted
model (`ptb agents check`), and every stage a sweep depends on is checked."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from posttrainbench.host.agent_check.agents import CHECKABLE_AGENTS
from posttrainbench.host.agent_check.report import STAGES, CheckReport
from posttrainbench.host.agent_check.run import run_check
from posttrainbench.host.scripted_model.script import default_script, parse_script
from posttrainbench.host.tasks.gpu_image import agent_cli_version
from tests.helpers import run_ptb
from tests.sandbox_support import requires_bwrap

pytestmark = [
    pytest.mark.slow,
    requires_bwrap,
    pytest.mark.skipif(shutil.which("npm") is None, reason="the agent CLIs install with npm"),
]


def _trial_dir(report: CheckReport) -> Path:
    (trial,) = [
        p for p in (Path(report.run_dir) / "jobs").glob("*/*") if (p / "result.json").is_file()
    ]
    return trial


def _stages(report: CheckReport) -> str:
    return "\n".join(f"{s.stage}: {'ok' if s.ok else 'FAIL'} {s.detail}" for s in report.stages)


@pytest.mark.parametrize("agent", CHECKABLE_AGENTS)
def test_the_real_cli_passes_every_stage_of_a_check(agent: str, tmp_path: Path) -> None:
    # The README's command as it stands for one CLI; the others score one question, since
    # the verifier's work is the same for every CLI (minutes of the tier's CPU each).
    limit = [] if agent == "claude-code" else ["--limit", "1"]
    done = run_ptb(
        "agents", "check", "-a", agent, *limit, "-o", str(tmp_path), "--json", timeout=1500
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = CheckReport.model_validate_json(done.stdout)
    assert [s.stage for s in report.stages] == list(STAGES), _stages(report)
    assert report.passed, _stages(report)
    assert report.cli_version == agent_cli_version(agent)
    # The script submits the base model unchanged: the reward is the base model's score.
    trial = _trial_dir(report)
    metrics = json.loads((trial / "verifier" / "metrics.json").read_text())
    assert metrics["base_model"]["accuracy"] == pytest.approx(report.reward)
    assert metrics["model_sha256"] == metrics["base_model"]["model_sha256"]
    # `ptb traces show` renders the CLI's own output with every command the script ran.
    shown = run_ptb("traces", "show", str(trial), timeout=120)
    assert shown.returncode == 0, shown.stderr
    for turn in default_script(agent).turns:
        if turn.shell:
            assert (
                turn.shell in shown.stdout.replace("\n", " ")
                or turn.shell.split(" && ")[0] in shown.stdout
            )


def test_a_failing_stage_says_which_and_why_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "lazy.yaml"
    script.write_text("turns:\n  - shell: ls /app\n  - text: I submit nothing.\n")
    done = run_ptb(
        "agents",
        "check",
        "-a",
        "claude-code",
        "--script",
        str(script),
        "--limit",
        "1",
        "-o",
        str(tmp_path / "runs"),
        timeout=1500,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("FAILED at final_model handed off: "), last


def test_the_agent_time_limit_stops_the_real_cli_and_its_children(tmp_path: Path) -> None:
    marker = "sleep 987"
    script = parse_script(f"turns:\n  - shell: '({marker} &) ; {marker}'\n  - text: never\n", "t")
    report = asyncio.run(
        run_check("claude-code", script=script, runs_dir=tmp_path, hours=0.01, limit=1)
    )
    result = json.loads((_trial_dir(report) / "result.json").read_text())
    assert result["exception_info"]["exception_type"] == "AgentTimeoutError"
    agent_run = next(s for s in report.stages if s.stage == "agent run")
    assert not agent_run.ok and "after 1 of 2" in agent_run.detail
    assert agent_run.seconds is not None and agent_run.seconds < 36 + 60
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", f"processes survived the deadline: {left.stdout}"


def test_the_reprompting_wrapper_reprompts_the_real_cli(tmp_path: Path) -> None:
    base = default_script("claude-code")
    copy = next(t for t in base.turns if t.shell and "final_model" in t.shell)
    script = parse_script(
        f"turns:\n  - text: I stop here, early.\n  - shell: {json.dumps(copy.shell)}\n  - text: Now done.\n",
        "t",
    )
    report = asyncio.run(
        run_check(
            "claude-code", script=script, runs_dir=tmp_path, reprompt_min_minutes=1.0, limit=1
        )
    )
    by_stage = {s.stage: s for s in report.stages}
    # The first round ends at once with time left; only a re-prompt reaches turns 2 and 3.
    assert by_stage["agent run"].ok, _stages(report)
    assert by_stage["final_model handed off"].ok, _stages(report)
    assert by_stage["secrets scrubbed"].ok, _stages(report)
