"""The compiler writes task directories that Harbor's loader reads and lint accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harbor.models.task.config import TaskConfig, VerifierEnvironmentMode
from harbor.models.task.task import Task

from posttrainbench.schemas import TaskSpec
from posttrainbench.tasks.compiler import compile_task
from posttrainbench.tasks.options import CompileOptions
from tests.helpers import run_ptb


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tasks")
    return compile_task("bfcl", "qwen3-1.7b", out, CompileOptions(hours=10))


def test_round_trip_through_harbor(task_dir: Path) -> None:
    config = TaskConfig.model_validate_toml((task_dir / "task.toml").read_text())
    assert config.agent.timeout_sec == 10 * 3600
    assert config.verifier.environment_mode == VerifierEnvironmentMode.SEPARATE
    assert [hook.command for hook in config.verifier.collect] == ["bash /opt/ptb/collect.sh"]
    assert config.environment.gpus == 1
    assert config.environment.cpus == 16
    assert config.environment.memory_mb == 128 * 1024
    assert config.environment.healthcheck is not None
    # Harbor's own loader accepts the directory, and dumping re-validates.
    task = Task(task_dir)
    assert task.config.task is not None and task.config.task.name == "posttrainbench/bfcl-qwen3-1.7b"
    assert TaskConfig.model_validate_toml(task.config.model_dump_toml()) == task.config


def test_harbor_lint_is_clean(task_dir: Path) -> None:
    harbor = Path(sys.executable).with_name("harbor")
    result = subprocess.run([str(harbor), "lint", "--json", str(task_dir)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


def test_layout(task_dir: Path) -> None:
    for rel in [
        "instruction.md",
        "environment/Dockerfile",
        "environment/requirements.txt",
        "environment/ptb/build.sh",
        "environment/ptb/start.sh",
        "environment/ptb/monitor.sh",
        "environment/ptb/collect.sh",
        "environment/ptb/task.json",
        "environment/ptb/lib/posttrainbench/evaluation/evaluate.py",
        "environment/workspace/evaluate.py",
        "environment/workspace/timer.sh",
        "environment/workspace/task_context/README.md",
        "tests/test.sh",
        "tests/task.json",
        "tests/lib/posttrainbench/evaluation/verify.py",
        "solution/solve.sh",
    ]:
        assert (task_dir / rel).exists(), rel
    assert (task_dir / "environment/workspace/templates").is_dir()
    # The agent's workspace must not carry the sealed verifier code or host-only code.
    assert not (task_dir / "environment/ptb/lib/posttrainbench/cli").exists()
    assert "ARG BASE_IMAGE" in (task_dir / "environment/Dockerfile").read_text()


def test_task_json_is_typed(task_dir: Path) -> None:
    spec = TaskSpec.model_validate_json((task_dir / "tests/task.json").read_text())
    assert spec.benchmark == "bfcl" and spec.model == "qwen3-1.7b" and spec.gpus == 1
    assert spec.model_source == "hf:Qwen/Qwen3-1.7B-Base"


def test_instruction_states_the_rules(task_dir: Path) -> None:
    text = (task_dir / "instruction.md").read_text()
    for needle in [
        "non-interactively",
        "10 hours",
        "bash /app/timer.sh",
        "Do not train on the benchmark's test data",
        "Do not modify `evaluate.py` or anything in `templates/`",
        "only fine-tune the given base model",
        "/app/final_model/",
        "--limit",
        "simple_python",
    ]:
        assert needle in text, needle


def test_timer_budget_matches_hours(tmp_path: Path) -> None:
    task = compile_task("bfcl", "smollm2-135m", tmp_path, CompileOptions(hours=0.5))
    assert "budget_s=1800" in (task / "environment/workspace/timer.sh").read_text()
    config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    assert config.environment.gpus == 0  # the offline model defaults to CPU


def test_generate_all(tmp_path: Path) -> None:
    result = run_ptb("tasks", "generate", "--all", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(
        f"bfcl-{m}" for m in ["qwen3-1.7b", "qwen3-4b", "smollm3-3b", "gemma3-4b", "smollm2-135m"]
    )
    for name in names:
        Task(tmp_path / name)
