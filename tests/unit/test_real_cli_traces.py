"""Traces the real agent CLIs wrote in `ptb agents check` runs (pinned versions, against the
scripted model; scrubbed), kept so that a parser drifting from a CLI's real output fails
here, not in a judge's blind spot. Regenerate them with `ptb agents check -a AGENT` and
copy the trial's `agent/` file when a pin moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrainbench.task.integrity.traces.load import parse_trace

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "real"
COPY = "/app/final_model"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("claude-code.txt", "claude-code"),
        ("codex.txt", "codex"),
        ("opencode.txt", "opencode"),
        # Gemini CLI as ptb runs it (--output-format stream-json), and Harbor's trajectory of it.
        ("gemini-cli.txt", "gemini-cli"),
        ("gemini-cli.trajectory.json", "harbor"),
    ],
)
def test_each_real_cli_trace_parses_with_every_scripted_command(name: str, fmt: str) -> None:
    trace = parse_trace(REAL / name)
    assert trace.format == fmt
    commands = trace.shell_commands()
    assert any("ls -la /app" in c for c in commands), commands
    assert any("bash /app/timer.sh" in c for c in commands), commands
    assert any(COPY in c for c in commands), commands
    assert trace.of_kind("message") and trace.of_kind("tool_call"), [e.kind for e in trace.events]
