"""User mistakes give one clear line on stderr and exit code 2, and lose nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_ptb


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error:"), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["tasks", "generate", "-b", "nosuch", "-M", "qwen3-1.7b", "-o", "OUT"],
            "unknown benchmark 'nosuch'",
        ),
        (["tasks", "generate", "-b", "bfcl", "-M", "gpt-9", "-o", "OUT"], "unknown model 'gpt-9'"),
        (
            [
                "tasks",
                "generate",
                "-b",
                "bfcl",
                "-M",
                "qwen3-1.7b",
                "--feedback",
                "val",
                "-o",
                "OUT",
            ],
            "Invalid value for '--feedback'",
        ),
        (["eval", "-b", "gsm8k", "--model-path", "OUT"], "is not a model directory"),
        (["eval", "-b", "nosuch", "--model-path", "OUT"], "unknown benchmark 'nosuch'"),
        (["baseline", "-b", "gsm8k", "-M", "gpt-9"], "unknown model 'gpt-9'"),
        (["data", "prepare", "-b", "bfcl,nosuch"], "unknown benchmark 'nosuch'"),
        (["data", "prepare", "-b", "bfcl", "-M", "gpt-9"], "unknown model 'gpt-9'"),
        (
            ["tasks", "generate", "-b", "bfcl", "-M", "qwen3-1.7b", "--hours", "-1", "-o", "OUT"],
            "invalid --hours",
        ),
        (["tasks", "generate", "-o", "OUT"], "either --benchmark and --base-model, or --all"),
        (
            ["run", "-b", "bfcl", "-M", "qwen3-1.7b", "-a", "oracle", "--env", "moon"],
            "'moon' is not one of 'local', 'docker', 'modal', 'daytona'",
        ),
        (["list", "nothing"], "No such command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    result = run_ptb(*args)
    assert result.returncode == 2, result.stderr
    assert expected in _one_error_line(result.stderr)


def test_unwritable_output_dir_keeps_existing_files(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("precious")
    result = run_ptb(
        "tasks", "generate", "-b", "bfcl", "-M", "smollm2-135m", "-o", str(blocker / "tasks")
    )
    assert result.returncode == 2
    assert "cannot write to output directory" in _one_error_line(result.stderr)
    assert blocker.read_text() == "precious"


def test_failed_recompile_keeps_the_previous_task(tmp_path: Path) -> None:
    ok = run_ptb("tasks", "generate", "-b", "bfcl", "-M", "smollm2-135m", "-o", str(tmp_path))
    assert ok.returncode == 0, ok.stderr
    task = tmp_path / "bfcl-smollm2-135m"
    before = (task / "task.toml").read_text()
    bad = run_ptb(
        "tasks", "generate", "-b", "bfcl", "-M", "smollm2-135m", "--hours", "0", "-o", str(tmp_path)
    )
    assert bad.returncode == 2
    assert (task / "task.toml").read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "staging dir left behind"


def test_run_of_a_judged_benchmark_without_a_key_fails_before_any_work(
    tmp_path: Path, monkeypatch
) -> None:
    for var in ("OPENAI_API_KEY", "PTB_JUDGE_RECORDINGS", "PTB_JUDGE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    result = run_ptb(
        "run",
        "-b",
        "healthbench",
        "-M",
        "qwen3-1.7b",
        "-a",
        "oracle",
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "scored by an LLM judge" in line and "OPENAI_API_KEY" in line
    assert not (tmp_path / "runs").exists()


def test_short_help_and_version() -> None:
    """`-h` works like `--help` on every level, `--version` names the package's version."""
    import posttrainbench

    version = run_ptb("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"ptb {posttrainbench.__version__}"
    for args in (["-h"], ["results", "collect", "-h"], ["rescore", "-h"]):
        shown = run_ptb(*args)
        assert shown.returncode == 0 and "Usage: ptb" in shown.stdout, (args, shown.stderr)
    # Docstring paragraphs are reflowed, not wrapped twice (a lone "task, in" line).
    rescore = run_ptb("rescore", "-h").stdout
    assert "current task, in the same kind" in " ".join(rescore.split())
    assert not any(line.strip(" │") == "task, in" for line in rescore.splitlines())
    bare = run_ptb()
    assert "Usage: ptb" in bare.stdout and "error" not in bare.stderr, bare.stderr


def test_ctrl_c_says_so_and_exits_130(tmp_path):
    """Issue 38 item 8: click turns Ctrl-C into Abort, which ended silently with status 1."""
    import os
    import signal
    import subprocess
    import sys
    import time

    fifo = tmp_path / "test.jsonl"
    os.mkfifo(fifo)  # the import blocks reading it until interrupted
    proc = subprocess.Popen(
        [sys.executable, "-c", "from posttrainbench.host.cli.app import main; main()"]
        + ["data", "import", "humaneval", str(fifo), "--cache-dir", str(tmp_path / "cache")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HARBOR_TELEMETRY": "0"},
        # As from a terminal: Ctrl-C at its default. A test process may have inherited it
        # ignored (an ignored SIGINT stays ignored across exec, and Python then installs no
        # KeyboardInterrupt handler).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Opening the FIFO's other end returns once the import has opened it: past start-up
    # (however long a loaded machine takes), and then blocked in the read.
    signal.alarm(120)
    try:
        writer = os.open(fifo, os.O_WRONLY)
    finally:
        signal.alarm(0)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    os.close(writer)
    assert proc.returncode == 130, (out, err)
    assert "interrupted; everything written so far is kept" in err
    assert "Traceback" not in err


def test_harbor_flags_pass_through_to_the_job_a_dry_run_writes(tmp_path):
    """Issue 38 item 9: `harbor run`'s --ak/--ae/--ek, --max-retries, --job-name and
    --dry-run, in `ptb run`: the job config it would run holds them; nothing runs."""
    import json

    args = ["run", "-b", "bfcl", "-M", "smollm2-135m", "-a", "nop", "--cpus", "2"]
    args += ["--memory-gb", "8", "--hours", "0.1", "-o", str(tmp_path), "--job-name", "mine"]
    args += ["--ak", "temperature=0.5", "--ae", "MY_VAR=a=b", "--ek", "keep=true"]
    result = run_ptb(*args, "--max-retries", "2", "--dry-run")
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "mine" / "job.json").read_text())
    assert "harbor run -c" in result.stdout and config["job_name"] == "mine"
    assert config["agents"][0]["kwargs"]["temperature"] == 0.5
    assert config["agents"][0]["env"]["MY_VAR"] == "a=b"
    assert config["environment"]["kwargs"]["keep"] is True
    # Retried: infrastructure and verifier errors only, never the agent's own outcome.
    retry = config["retry"]
    assert (
        retry["max_retries"] == 2 and "EnvironmentStartTimeoutError" in retry["include_exceptions"]
    )
    assert "AgentTimeoutError" not in retry["include_exceptions"]
    assert (
        not (tmp_path / "mine" / "jobs").exists() and not (tmp_path / "mine" / "run.json").exists()
    )

    bad = run_ptb(*args[:-6], "--ae", "NOEQUALS", "--dry-run")
    assert bad.returncode == 2 and "invalid --ae 'NOEQUALS': expected KEY=VALUE" in _one_error_line(
        bad.stderr
    )
