"""`ptb agents check`: bad input is one clear line and exit 2, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_ptb


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-a", "nope"],
            "error: cannot check agent 'nope'; choose one of: claude-code, codex, gemini-cli, opencode",
        ),
        (["-a", "codex", "--script", "missing.yaml"], "error: cannot read script missing.yaml"),
        (["-a", "codex", "-e", "modal"], "error: agent checks run on local or docker, not 'modal'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = run_ptb(
        "agents", "check", *args, "-o", str(tmp_path / "runs"), cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "runs").exists()  # nothing written


def test_a_malformed_script_names_the_turn(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("turns:\n  - shell: ls\n    tool: Read\n")
    done = run_ptb(
        "agents", "check", "-a", "codex", "--script", str(script), cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2
    assert "turns.0: Value error, a turn calls either `shell` or `tool`, not both" in done.stderr
