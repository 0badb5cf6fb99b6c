"""Everything a user can get wrong is checked before anything expensive: one line, exit 2,
no traceback, and nothing left behind (no run directory, no environment build)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from posttrainbench.core.errors import PtbError
from tests.helpers import run_ptb


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error:") and "Traceback" not in stderr, stderr
    return lines[0]


def _files_under(root: Path) -> list[Path]:
    return sorted(root.rglob("*")) if root.exists() else []


def test_a_misspelt_agent_stops_before_any_build_with_a_suggestion(tmp_path: Path) -> None:
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    started = time.monotonic()
    result = run_ptb(
        "run",
        "--benchmark",
        "bfcl",
        "--base-model",
        "smollm2-135m",
        "--agent",
        "claud-code",
        "--runs-dir",
        str(runs),
        cwd=tmp_path,
        env={"PTB_CACHE_DIR": str(cache)},
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "unknown agent 'claud-code'" in line and "did you mean 'claude-code'?" in line
    assert "{" not in line and len(line) < 300  # a short list, not Harbor's set of 49 names
    # Before any task was compiled or environment built: fast, and nothing written.
    assert elapsed < 20, elapsed
    assert not runs.exists() and _files_under(cache) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--benchmark", "nosuch", "--base-model", "qwen3-1.7b"], "unknown benchmark 'nosuch'"),
        (["--benchmark", "bfcl", "--base-model", "gpt-9"], "unknown model 'gpt-9'"),
    ],
)
def test_run_with_an_unknown_id_is_one_line_and_leaves_no_run_dir(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    runs = tmp_path / "runs"
    result = run_ptb("run", *args, "--agent", "oracle", "--runs-dir", str(runs), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert expected in _one_error_line(result.stderr)
    assert not runs.exists()


def test_a_sweep_with_a_misspelt_agent_writes_no_sweep_dir(tmp_path: Path) -> None:
    result = run_ptb(
        "sweep",
        "--benchmark",
        "bfcl",
        "--base-model",
        "smollm2-135m",
        "--agent",
        "oracle,codx:openai/gpt-5",
        "--name",
        "typo",
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "did you mean 'codex'?" in _one_error_line(result.stderr)
    assert not (tmp_path / "ptb-sweeps").exists()


def test_cache_push_without_a_modal_login_stops_before_preparing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    result = run_ptb(
        "cache",
        "push",
        "vol",
        "--base-model",
        "smollm2-135m",
        "--cache-dir",
        str(cache),
        env={"HOME": str(tmp_path), "MODAL_TOKEN_ID": "", "MODAL_TOKEN_SECRET": ""},
    )
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "ptb cache push" in line and "modal token new" in line
    assert not cache.exists()


def test_a_report_to_an_unwritable_place_is_a_user_error(tmp_path: Path) -> None:
    from posttrainbench.host.results.report.render import write_report

    with pytest.raises(PtbError, match="cannot write /proc/x.html"):
        write_report("<html></html>", Path("/proc/x.html"))


def test_unknown_agents_and_custom_classes_are_checked_offline() -> None:
    from posttrainbench.host.runner.preflight import check_agent

    for good in ("oracle", "claude-code", "posttrainbench.host.agents.reprompt:RepromptingAgent"):
        check_agent(good)
    with pytest.raises(PtbError, match="cannot load agent 'no_such_pkg.mod:Agent'"):
        check_agent("no_such_pkg.mod:Agent")
    with pytest.raises(PtbError) as info:
        check_agent("zzzz")
    assert "did you mean" not in str(info.value) and "module:Class" in str(info.value)


def test_a_run_whose_task_cannot_compile_leaves_no_run_dir(tmp_path: Path, monkeypatch) -> None:
    import posttrainbench.host.runner.job_runner as job_runner
    from posttrainbench.host.runner.job_runner import RunRequest

    def refuse(*args, **kwargs):
        (tmp_path / "runs" / "r" / "tasks").mkdir(parents=True)  # as staging would
        raise PtbError("data for bfcl cannot be fetched")

    monkeypatch.setattr(job_runner, "compile_task", refuse)
    request = RunRequest(
        benchmark="bfcl",
        model="smollm2-135m",
        agent="oracle",
        env="docker",
        runs_dir=tmp_path / "runs",
        run_id="r",
    )
    with pytest.raises(PtbError, match="cannot be fetched"):
        job_runner.run(request)
    assert not (tmp_path / "runs" / "r").exists()


@pytest.mark.parametrize("command", ["eval", "baseline"])
def test_an_unwritable_output_stops_eval_and_baseline_before_any_download(
    tmp_path: Path, command: str
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    what = ["--model-path", str(model)] if command == "eval" else ["-M", "smollm2-135m"]
    cache = tmp_path / "cache"
    result = run_ptb(
        command,
        "-b",
        "gsm8k",
        *what,
        "-o",
        "/proc/x.json",
        env={"PTB_CACHE_DIR": str(cache)},
    )
    assert result.returncode == 2, result.stderr
    assert "-o/--out /proc/x.json: cannot write in /proc" in _one_error_line(result.stderr)
    assert not cache.exists()  # no data fetched, no model prepared, no environment built
