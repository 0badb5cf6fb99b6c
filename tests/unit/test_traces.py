"""Trace parsing: every agent's format normalizes to the same events; bad input degrades to raw."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from posttrainbench.core.errors import PtbError
from posttrainbench.task.integrity.traces.detect import detect_format, is_known_format
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage
from posttrainbench.task.integrity.traces.load import find_trial_traces, parse_trace
from posttrainbench.task.integrity.traces.render import render_trace
from posttrainbench.task.integrity.traces.tools import derive_actions, urls_in_text
from tests.helpers import run_ptb

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _kinds(trace: NormalizedTrace) -> list[str]:
    return [e.kind for e in trace.events]


def _paths(trace: NormalizedTrace, kind: str) -> list[str]:
    return [e.path for e in trace.of_kind(kind)]  # type: ignore[arg-type]


def _usage_event_sum(trace: NormalizedTrace) -> TokenUsage:
    total = TokenUsage()
    for e in trace.of_kind("usage"):
        assert e.usage is not None
        total = TokenUsage(
            input_tokens=total.input_tokens + e.usage.input_tokens,
            output_tokens=total.output_tokens + e.usage.output_tokens,
            cache_read_tokens=total.cache_read_tokens + e.usage.cache_read_tokens,
            cache_write_tokens=total.cache_write_tokens + e.usage.cache_write_tokens,
        )
    return total


# -- one test per agent format ----------------------------------------------------------


def test_claude_code_stream_json() -> None:
    trace = parse_trace(FIXTURES / "claude-code.txt")
    assert trace.format == "claude-code"
    assert trace.warnings == []
    assert _kinds(trace) == [
        "message",
        "message",
        "usage",
        "tool_call",
        "file_read",
        "tool_result",
        "tool_call",
        "shell",
        "url",
        "usage",
        "tool_result",
        "tool_call",
        "url",
        "usage",
        "tool_result",
        "tool_call",
        "url",
        "usage",
        "tool_result",
        "tool_call",
        "file_write",
        "usage",
        "tool_result",
        "message",
        "message",
        "usage",
    ]
    assert trace.shell_commands() == [
        "curl -sL https://huggingface.co/api/models/Qwen/Qwen3-1.7B-Base | head -c 300"
    ]
    assert trace.urls() == [
        "https://huggingface.co/api/models/Qwen/Qwen3-1.7B-Base",
        "https://arxiv.org/abs/2110.14168",
        "search:supervised fine-tuning small base model GSM8K learning rate",
    ]
    assert _paths(trace, "file_read") == ["/home/agent/evaluate.py"]
    assert _paths(trace, "file_write") == ["/home/agent/train.py"]
    # The streamed message msg_01 appears twice with growing usage: counted once, last value.
    first_usage = trace.of_kind("usage")[0].usage
    assert first_usage == TokenUsage(input_tokens=3, output_tokens=85, cache_write_tokens=2000)
    assert _usage_event_sum(trace) == TokenUsage(
        input_tokens=25, output_tokens=1255, cache_read_tokens=12450, cache_write_tokens=3150
    )
    # The final `result` totals win over the per-message sum; its cost is the run's cost.
    assert trace.usage == TokenUsage(
        input_tokens=25,
        output_tokens=1260,
        cache_read_tokens=12450,
        cache_write_tokens=3150,
        cost_usd=0.2345,
    )
    results = trace.of_kind("tool_result")
    assert [r.tool for r in results] == ["Read", "Bash", "WebFetch", "WebSearch", "Write"]
    assert trace.events[23].text.startswith("[reasoning] ")
    assert trace.events[24].model == "claude-sonnet-4-5-20250929"


def test_codex_exec_json() -> None:
    trace = parse_trace(FIXTURES / "codex.txt")
    assert trace.format == "codex"
    assert trace.warnings == []
    assert _kinds(trace) == [
        "message",  # reasoning
        "tool_call",
        "file_read",
        "tool_result",  # MCP read_file
        "tool_call",
        "shell",
        "url",
        "tool_result",  # curl
        "tool_call",
        "shell",
        "url",
        "tool_result",  # git clone (failed)
        "tool_call",
        "url",  # web_search
        "tool_call",
        "file_write",
        "file_write",  # file_change
        "message",
        "usage",
    ]
    assert trace.shell_commands() == [
        "bash -lc 'curl -sSL https://raw.githubusercontent.com/openai/grade-school-math/master/README.md | head -20'",
        "bash -lc 'git clone --depth 1 https://github.com/huggingface/trl.git /tmp/trl'",
    ]
    assert trace.urls() == [
        "https://raw.githubusercontent.com/openai/grade-school-math/master/README.md",
        "https://github.com/huggingface/trl.git",
        "search:qwen3 1.7b base gsm8k accuracy",
    ]
    assert _paths(trace, "file_read") == ["/home/agent/evaluate.py"]
    assert _paths(trace, "file_write") == ["/home/agent/train.py", "/home/agent/run.sh"]
    assert "[exit code 128]" in (trace.of_kind("tool_result")[2].text or "")
    # Codex's input_tokens include the cached ones; no cost is reported.
    assert trace.usage == TokenUsage(input_tokens=6000, output_tokens=1500, cache_read_tokens=18000)


def test_gemini_cli_stream_json() -> None:
    trace = parse_trace(FIXTURES / "gemini-cli.txt")
    assert trace.format == "gemini-cli"
    # Harbor tees stderr too: the CLI's banner line is kept as raw text, with a warning.
    assert trace.events[0].kind == "raw" and "YOLO mode" in (trace.events[0].text or "")
    assert trace.warnings == ["line 1: not valid JSON; kept as raw text"]
    assert _kinds(trace)[1:] == [
        "message",
        "message",
        "tool_call",
        "file_read",
        "tool_result",
        "tool_call",
        "shell",
        "url",
        "tool_result",
        "tool_call",
        "url",
        "tool_result",
        "tool_call",
        "url",
        "tool_result",
        "tool_call",
        "file_write",
        "tool_result",
        "message",
        "usage",
    ]
    assert trace.shell_commands() == [
        "wget -q https://huggingface.co/datasets/openai/gsm8k/resolve/main/main/train-00000-of-00001.parquet"
        " -O data/train.parquet"
    ]
    assert trace.urls() == [
        "https://huggingface.co/datasets/openai/gsm8k/resolve/main/main/train-00000-of-00001.parquet",
        "search:SmolLM2 GSM8K fine-tuning",
        "https://huggingface.co/blog/smollm",
    ]
    assert _paths(trace, "file_read") == ["/home/agent/evaluate.py"]
    assert _paths(trace, "file_write") == ["/home/agent/train.py"]
    # Streamed deltas become one message; a failed tool says so.
    assert trace.of_kind("message")[-1].text == "I wrote train.py and will start training now."
    assert trace.of_kind("tool_result")[1].text == "[error] Command exited with code 4"
    assert trace.usage == TokenUsage(
        input_tokens=22000, output_tokens=2100, cache_read_tokens=30000
    )


def test_opencode_json() -> None:
    trace = parse_trace(FIXTURES / "opencode.txt")
    assert trace.format == "opencode"
    assert trace.warnings == []
    assert _kinds(trace) == [
        "message",
        "tool_call",
        "file_read",
        "tool_result",
        "tool_call",
        "shell",
        "url",
        "tool_result",
        "usage",
        "tool_call",
        "url",
        "tool_result",
        "tool_call",
        "file_write",
        "tool_result",
        "tool_call",
        "file_write",
        "tool_result",
        "message",
        "usage",
    ]
    assert len(trace.shell_commands()) == 1 and trace.shell_commands()[0].startswith("python -c ")
    assert trace.urls() == [
        "https://huggingface.co/api/models/HuggingFaceTB/SmolLM2-135M",
        "https://github.com/openai/grade-school-math",
    ]
    assert _paths(trace, "file_read") == ["/home/agent/evaluate.py"]
    assert _paths(trace, "file_write") == ["/home/agent/train.py", "/home/agent/run.sh"]
    # Two steps: reasoning tokens count as output; cost is the sum of the steps' costs.
    assert trace.usage.model_dump(exclude={"cost_usd"}) == {
        "input_tokens": 8687,
        "output_tokens": 372,
        "cache_read_tokens": 10364,
        "cache_write_tokens": 40,
    }
    assert trace.usage.cost_usd == pytest.approx(0.0579)
    assert trace.events[1].timestamp == "2025-10-21T09:00:01+00:00"


def test_harbor_atif_trajectory() -> None:
    trace = parse_trace(FIXTURES / "trajectory.json")
    assert trace.format == "harbor"
    assert trace.warnings == []
    assert _kinds(trace) == [
        "message",
        "message",
        "tool_call",
        "file_read",
        "tool_result",
        "usage",
        "tool_call",
        "shell",
        "url",
        "tool_result",
        "usage",
        "message",
        "tool_call",
        "url",
        "tool_call",
        "url",
        "tool_result",
        "tool_result",
        "usage",
        "message",
        "message",
        "tool_call",
        "file_write",
        "tool_result",
        "usage",
    ]
    assert trace.shell_commands() == [
        "git clone https://github.com/huggingface/alignment-handbook.git /tmp/ah && ls /tmp/ah"
    ]
    assert trace.urls() == [
        "https://github.com/huggingface/alignment-handbook.git",
        "search:alignment handbook sft recipe",
        "https://huggingface.co/docs/trl/sft_trainer",
    ]
    assert _paths(trace, "file_read") == ["/home/agent/evaluate.py"]
    assert _paths(trace, "file_write") == ["/home/agent/train.py"]
    # prompt_tokens include cache reads and (Claude) cache writes; they are split out.
    assert trace.of_kind("usage")[0].usage == TokenUsage(
        input_tokens=3, output_tokens=85, cache_write_tokens=2000, cost_usd=0.01
    )
    # Tokens are summed over steps; the cost is final_metrics' reported total, not the step sum.
    assert trace.usage == TokenUsage(
        input_tokens=16,
        output_tokens=665,
        cache_read_tokens=8296,
        cache_write_tokens=2646,
        cost_usd=0.0612,
    )
    assert (
        trace.of_kind("message")[3].text
        == "[reasoning] A short SFT run with lr 2e-5 should fit the budget."
    )


# -- detection, fallbacks, bad lines ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-code.txt", "claude-code"),
        ("codex.txt", "codex"),
        ("gemini-cli.txt", "gemini-cli"),
        ("opencode.txt", "opencode"),
        ("trajectory.json", "harbor"),
    ],
)
def test_format_is_detected_from_content_not_name(tmp_path: Path, name: str, expected: str) -> None:
    text = (FIXTURES / name).read_text()
    assert detect_format(text) == expected
    renamed = tmp_path / "agent-output.log"
    shutil.copy(FIXTURES / name, renamed)
    assert parse_trace(renamed).format == expected


def test_is_known_format_agrees_with_detect_format() -> None:
    """The trace scan's early-stopping check answers as `detect_format(...) is not None`."""
    samples = [path.read_text() for path in sorted(FIXTURES.rglob("*")) if path.is_file()]
    doc = json.loads((FIXTURES / "trajectory.json").read_text())
    samples += [
        json.dumps(doc),
        "",
        "plain text\n",
        '{"level": "info"}\n' * 300 + '{"type": "thread.started"}\n',  # past SNIFF_LINES
        '{"level": "info"}\n{"type": "thread.started"}\n',
        '{\n  "not": "atif"\n}\n',
        '{"type": "result", "stats": {}}\n',
        (FIXTURES / "claude-code.txt").read_text()[:500],  # cut mid-line
    ]
    for text in samples:
        assert is_known_format(text) == (detect_format(text) is not None), text[:80]


def test_harbor_trajectory_on_one_line_is_detected() -> None:
    doc = json.loads((FIXTURES / "trajectory.json").read_text())
    assert detect_format(json.dumps(doc)) == "harbor"


def test_unknown_format_falls_back_to_raw_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "agent.log"
    log.write_text('Starting agent...\n\n$ ls -la\ntotal 0\n{"level": "info", "msg": "done"}\n')
    with caplog.at_level(logging.WARNING, logger="posttrainbench.task.integrity.traces.load"):
        trace = parse_trace(log)
    assert trace.format == "raw"
    assert _kinds(trace) == ["raw"] * 4
    assert [e.text for e in trace.events][:2] == ["Starting agent...", "$ ls -la"]
    assert len(trace.warnings) == 1 and "unknown trace format" in trace.warnings[0]
    assert "unknown format" in caplog.text
    assert trace.usage == TokenUsage()


def test_a_broken_trajectory_json_falls_back_to_raw() -> None:
    text = (FIXTURES / "trajectory.json").read_text()
    trace = parse_trace(text[: len(text) // 2], format="harbor")  # truncated document
    assert trace.format == "raw"
    assert trace.warnings and "cannot parse as harbor" in trace.warnings[0]


def test_a_corrupt_line_in_a_claude_trace_becomes_raw_with_a_warning(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude-code.txt").read_text().splitlines()
    corrupt = lines[4][: len(lines[4]) // 2]  # the Bash tool_use line, cut in half mid-write
    broken = tmp_path / "claude-code.txt"
    broken.write_text("\n".join(lines[:4] + [corrupt] + lines[5:]) + "\n")
    trace = parse_trace(broken)
    assert trace.format == "claude-code"
    raws = trace.of_kind("raw")
    assert [r.text for r in raws] == [corrupt]
    assert trace.warnings == ["line 5: not valid JSON; kept as raw text"]
    assert trace.shell_commands() == []  # the lost call is not invented
    assert _paths(trace, "file_write") == ["/home/agent/train.py"]  # later lines still parse
    assert trace.usage.cost_usd == 0.2345


def test_text_input_and_forced_format() -> None:
    text = (FIXTURES / "codex.txt").read_text()
    assert parse_trace(text).format == "codex"
    forced = parse_trace(text, format="raw")
    assert forced.format == "raw" and len(forced.events) == len(text.strip().splitlines())


def test_missing_file_and_bad_format_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(PtbError, match="trace file not found"):
        parse_trace(tmp_path / "nope.jsonl")
    with pytest.raises(PtbError, match="trace file not found"):
        parse_trace(str(tmp_path / "nope.jsonl"))
    with pytest.raises(PtbError, match="unknown trace format 'claude'"):
        parse_trace(FIXTURES / "codex.txt", format="claude")


# -- the tool-name rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tool_input", "expected"),
    [
        (
            "Bash",
            {"command": "wget https://example.com/a.tgz && pip install ."},
            [
                ("shell", "wget https://example.com/a.tgz && pip install ."),
                ("url", "https://example.com/a.tgz"),
            ],
        ),
        ("shell", {"command": ["bash", "-lc", "ls"]}, [("shell", "ls")]),
        ("exec_command", {"cmd": "python train.py"}, [("shell", "python train.py")]),
        ("bash_command", {"keystrokes": "nvidia-smi\n", "duration": 1}, [("shell", "nvidia-smi")]),
        ("MultiEdit", {"file_path": "/a.py", "edits": []}, [("file_write", "/a.py")]),
        ("NotebookEdit", {"notebook_path": "/n.ipynb"}, [("file_write", "/n.ipynb")]),
        (
            "replace",
            {"file_path": "/b.py", "old_string": "x", "new_string": "y"},
            [("file_write", "/b.py")],
        ),
        (
            "apply_patch",
            {
                "input": "*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** End Patch"
            },
            [("file_write", "a.py"), ("file_write", "b.py")],
        ),
        ("read_many_files", {"paths": ["/x", "/y"]}, [("file_read", "/x"), ("file_read", "/y")]),
        (
            "web_search_call",
            {"action_type": "search", "query": "gsm8k answers"},
            [("url", "search:gsm8k answers")],
        ),
        (
            "mcp__browser__navigate",
            {"url": "https://example.org/x"},
            [("url", "https://example.org/x")],
        ),
        ("Glob", {"pattern": "**/*.py"}, []),
    ],
)
def test_tool_actions(name: str, tool_input: dict, expected: list[tuple[str, str]]) -> None:
    assert [(a.kind, a.value) for a in derive_actions(name, tool_input)] == expected


def test_urls_in_text_trims_quotes_and_punctuation() -> None:
    text = (
        "curl 'https://a.example/x?y=1'; echo \"see https://b.example/docs.\" (https://c.example/p)"
    )
    assert urls_in_text(text) == [
        "https://a.example/x?y=1",
        "https://b.example/docs",
        "https://c.example/p",
    ]


# -- trial directories, rendering and the CLI -----------------------------------------------


def test_find_trial_traces_ranks_agent_stream_first(tmp_path: Path) -> None:
    agent = tmp_path / "trial__abc" / "agent"
    (agent / "sessions" / "projects" / "-home-agent").mkdir(parents=True)
    shutil.copy(FIXTURES / "claude-code.txt", agent / "claude-code.txt")
    shutil.copy(FIXTURES / "trajectory.json", agent / "trajectory.json")
    shutil.copy(
        FIXTURES / "claude-code.txt", agent / "sessions" / "projects" / "-home-agent" / "s1.jsonl"
    )
    (agent / "install.sh").write_text("#!/bin/bash\n")
    (agent / "notes.txt").write_text("not a trace\n")
    (agent / "empty.jsonl").write_text("")
    found = find_trial_traces(tmp_path / "trial__abc")
    assert [p.relative_to(agent).as_posix() for p in found] == [
        "claude-code.txt",
        "trajectory.json",
        "sessions/projects/-home-agent/s1.jsonl",
    ]
    assert find_trial_traces(tmp_path / "missing") == []


def test_a_stream_in_no_known_format_ranks_after_a_known_trace_and_alone_is_the_trace(
    tmp_path: Path,
) -> None:
    """Gemini's default output is plain text: kept, but after a parseable trajectory; a
    trial with nothing else still has it as its trace."""
    agent = tmp_path / "trial__abc" / "agent"
    agent.mkdir(parents=True)
    (agent / "gemini-cli.txt").write_text("Loaded cached credentials.\nDone.\n")
    found = find_trial_traces(tmp_path / "trial__abc")
    assert [p.relative_to(agent).as_posix() for p in found] == ["gemini-cli.txt"]
    shutil.copy(FIXTURES / "trajectory.json", agent / "trajectory.json")
    found = find_trial_traces(tmp_path / "trial__abc")
    assert [p.relative_to(agent).as_posix() for p in found] == [
        "trajectory.json",
        "gemini-cli.txt",
    ]


def test_render_shows_commands_paths_urls_and_usage() -> None:
    trace = parse_trace(FIXTURES / "codex.txt")
    text = render_trace(trace)
    assert text.startswith("# Trace (codex)")
    for command in trace.shell_commands():
        assert f"shell $ {command}" in text
    short = render_trace(trace, max_chars=30)
    assert trace.shell_commands()[0] not in short and "shell $ bash -lc 'curl -sSL \n[... " in short
    assert "write file: /home/agent/run.sh" in text
    assert "url: search:qwen3 1.7b base gsm8k accuracy" in text
    assert "## Usage\nin 6,000 · out 1,500 · cache read 18,000 · cost unknown" in text
    long = parse_trace(
        json.dumps(
            {
                "type": "item.completed",
                "item": {"id": "i", "type": "agent_message", "text": "x" * 5000},
            }
        )
        + "\n"
    )
    assert "characters cut" in render_trace(long, max_chars=100)
    assert "characters cut" not in render_trace(long, max_chars=0)


def test_cli_show_renders_and_json(tmp_path: Path) -> None:
    result = run_ptb("traces", "show", str(FIXTURES / "opencode.txt"), "--max-chars", "200")
    assert result.returncode == 0, result.stderr
    assert "# Trace (opencode)" in result.stdout
    assert "shell $ python -c" in result.stdout
    assert "$0.0579" in result.stdout
    result = run_ptb("traces", "show", str(FIXTURES / "trajectory.json"), "--json")
    assert result.returncode == 0, result.stderr
    parsed = NormalizedTrace.model_validate_json(result.stdout)
    assert parsed.format == "harbor" and parsed.usage.cost_usd == 0.0612


def test_cli_show_accepts_a_trial_directory(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    shutil.copy(FIXTURES / "gemini-cli.txt", tmp_path / "agent" / "gemini-cli.txt")
    result = run_ptb("traces", "show", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "# Trace (gemini-cli)" in result.stdout


def test_cli_show_reads_an_oracle_trials_plain_log(tmp_path: Path) -> None:
    """Issue 38 item 8: an agent with no trace in a known format (oracle) has its own log."""
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "oracle.txt").write_text("step 10 loss 0.18 151s\nsaved final_model\n")
    (tmp_path / "agent" / "ptb_start_time").write_text("1765000000\n")
    result = run_ptb("traces", "show", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "# Trace (raw)" in result.stdout and "agent/oracle.txt" in result.stdout
    assert "step 10 loss 0.18" in result.stdout and "saved final_model" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["traces", "show", "MISSING"], "trace file not found"),
        (["traces", "show", "FIXTURE", "--format", "claude"], "'claude' is not one of"),
        (["traces", "show", "EMPTYDIR"], "no agent trace found"),
    ],
)
def test_cli_user_errors_are_one_line_exit_2(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    (tmp_path / "empty").mkdir()
    subs = {
        "MISSING": str(tmp_path / "missing.jsonl"),
        "FIXTURE": str(FIXTURES / "codex.txt"),
        "EMPTYDIR": str(tmp_path / "empty"),
    }
    result = run_ptb(*[subs.get(a, a) for a in args])
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], result.stderr
    assert result.stdout == ""


def test_odd_json_shapes_never_raise() -> None:
    lines = [
        {
            "type": "assistant",
            "message": {
                "id": {"x": 1},
                "model": [1],
                "content": [
                    {"type": "tool_use", "id": {"not": "a string"}, "name": 7, "input": "ls"}
                ],
                "usage": "lots",
            },
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": [1], "content": {"a": 1}}]
            },
        },
        {"type": "result", "total_cost_usd": "free", "usage": None},
        {
            "type": "assistant",
            "message": {
                "id": "m2",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "Bash",
                        "input": {"command": "echo ok"},
                    }
                ],
            },
        },
    ]
    trace = parse_trace("\n".join(json.dumps(line) for line in lines) + "\n")
    assert trace.format == "claude-code"
    assert trace.shell_commands() == ["echo ok"]  # the well-formed line after the odd ones
    assert [e.tool for e in trace.of_kind("tool_call")] == ["7", "Bash"]
    assert trace.usage.cost_usd is None
