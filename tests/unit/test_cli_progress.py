"""Long work shows progress: plain lines (never carriage returns) when stderr is a log, the
environment build's output in its log only, and `ptb data prepare` going past failures."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from posttrainbench.core.errors import PtbError


def test_line_progress_in_a_log_is_plain_lines() -> None:
    from posttrainbench.task.evaluation.progress import LineProgress

    stream = io.StringIO()
    progress = LineProgress("gsm8k [test]", stream=stream, every_s=0.0)
    progress.say("loading the model from m")
    progress.start_attempt(total=5, attempt=1, max_new_tokens=256)
    for _ in range(5):
        progress.advance(1)
    text = stream.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "gsm8k [test]: loading the model from m"
    assert lines[1] == "gsm8k [test]: generating 5 answers"
    assert lines[-1].startswith("gsm8k [test]: 5/5 answers")


def test_eval_reports_loading_and_answers(monkeypatch, tmp_path: Path, capsys) -> None:
    """`ptb eval` passes --progress; the module then reports to stderr, not silence."""
    import posttrainbench.task.evaluation.runner as runner
    from posttrainbench.task.benchmarks import get_benchmark
    from posttrainbench.task.benchmarks.base import Sample
    from posttrainbench.task.evaluation import evaluate
    from posttrainbench.task.evaluation.progress import LineProgress

    seen: dict = {}

    class _Stop(Exception):
        pass

    def fake_evaluate_model(*args, progress=None, **kwargs):
        seen["progress"] = progress
        raise _Stop

    monkeypatch.setattr(runner, "evaluate_model", fake_evaluate_model)
    bench = get_benchmark("gsm8k")
    monkeypatch.setattr(
        type(bench),
        "load",
        lambda self, split, limit: [Sample(id="1", category="c", data={"question": "1+1?"})],
    )
    with pytest.raises(_Stop):
        evaluate.main(["--benchmark", "gsm8k", "--model-path", str(tmp_path), "--progress"])
    assert isinstance(seen["progress"], LineProgress)
    assert f"loading the model from {tmp_path}" in capsys.readouterr().err


def test_helper_processes_draw_no_bars_into_a_log(monkeypatch) -> None:
    import subprocess

    import posttrainbench.host.envs.eval_env as eval_env

    envs: list[dict] = []

    def fake_run(argv, env=None, **kwargs):
        envs.append(env)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(eval_env.subprocess, "run", fake_run)
    monkeypatch.setattr(eval_env.sys, "stderr", io.StringIO())  # not a terminal
    assert eval_env.run_module("python", "m", [], {}) == 0
    assert envs[0]["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and envs[0]["TQDM_DISABLE"] == "1"


@dataclass(frozen=True)
class _Spec:
    name: str


@dataclass(frozen=True)
class _Layer:
    spec: _Spec
    log: Path
    built: bool = False
    entry: Path = Path("/nonexistent")

    def build_logs(self) -> list[Path]:
        return [self.log]


def test_a_failed_environment_build_names_its_log_and_shows_none_of_it(
    monkeypatch, tmp_path: Path
) -> None:
    import posttrainbench.host.runner.prebuild as prebuild
    from posttrainbench.host.envs.layer_build import EnvironmentBuildError

    log = tmp_path / "build.log"
    log.write_text("WARNING: pip is noisy\nERROR: no matching distribution\n")
    kept = tmp_path / "failed" / "venv-abc.log"

    def fail(environment_dir, python):
        time.sleep(1.2)  # long enough for one progress poll
        raise EnvironmentBuildError(
            f"Building layer 'venv' of the task environment X failed: `pip install` failed. "
            f"Build log: {kept}"
        )

    monkeypatch.setattr(prebuild, "resolve_task_python", lambda d: "python")
    monkeypatch.setattr(prebuild, "plan_layers", lambda d, p: [_Layer(_Spec("venv"), log)])
    monkeypatch.setattr(prebuild, "ensure_layers", fail)
    out = io.StringIO()
    with pytest.raises(PtbError) as info:
        prebuild.prebuild_local_environment(tmp_path, Console(file=out, width=200))
    assert str(info.value).endswith(f"Build log: {kept}") and "\n" not in str(info.value)
    shown = out.getvalue()
    assert f"building layer venv of the task environment (log: {log})" in shown
    assert "pip is noisy" not in shown and "\r" not in shown


def test_data_prepare_all_prepares_what_it_can_then_lists_failures(
    monkeypatch, tmp_path: Path
) -> None:
    import posttrainbench.host.data.prepare as prepare
    from posttrainbench.host.cli.app import app
    from posttrainbench.host.data.manifest import DataManifest

    done: list[str] = []

    def fake_prepare(benchmark, cache=None, force=False):
        if benchmark in ("gpqamain", "aime2025"):
            raise prepare.DataPrepareError(f"{benchmark}: cannot download https://x: offline")
        done.append(benchmark)
        return DataManifest(
            benchmark=benchmark,
            provenance="test",
            prepared_at="2026-01-01T00:00:00+00:00",
            splits={},
            dev_source="carved",
        )

    monkeypatch.setattr(prepare, "prepare_benchmark", fake_prepare)
    result = CliRunner().invoke(
        app, ["data", "prepare", "--cache-dir", str(tmp_path)], catch_exceptions=True
    )
    assert isinstance(result.exception, PtbError), result.output
    assert "2 of 7 could not be prepared" in str(result.exception)
    # Everything after the first failure was still prepared.
    assert set(done) == {"arenahardwriting", "bfcl", "gsm8k", "healthbench", "humaneval"}
    failures = [line for line in result.output.splitlines() if line.startswith("failed: ")]
    assert failures == [
        "failed: aime2025: cannot download https://x: offline",
        "failed: gpqamain: cannot download https://x: offline",
    ]
