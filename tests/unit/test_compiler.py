"""The compiler writes task directories that Harbor's loader reads and lint accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harbor.models.task.config import TaskConfig, VerifierEnvironmentMode
from harbor.models.task.task import Task

from posttrainbench.host.catalog import list_benchmarks
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.integrity.agentic.config import AGENTIC_ENV
from posttrainbench.task.schemas import TaskSpec
from tests.data_fixtures import seed_prepared
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
    assert config.environment.gpu_types == ["H100"]  # PostTrainBench's hardware, exactly
    assert config.environment.cpus == 16
    assert config.environment.memory_mb == 128 * 1024
    assert config.environment.healthcheck is not None
    # Harbor's own loader accepts the directory, and dumping re-validates.
    task = Task(task_dir)
    assert (
        task.config.task is not None and task.config.task.name == "posttrainbench/bfcl-qwen3-1.7b"
    )
    assert TaskConfig.model_validate_toml(task.config.model_dump_toml()) == task.config


def test_harbor_lint_is_clean(task_dir: Path) -> None:
    harbor = Path(sys.executable).with_name("harbor")
    result = subprocess.run(
        [str(harbor), "lint", "--json", str(task_dir)], capture_output=True, text=True
    )
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
        "environment/ptb/lib/posttrainbench/task/evaluation/evaluate.py",
        "environment/workspace/evaluate.py",
        "environment/workspace/timer.sh",
        "environment/workspace/task_context/README.md",
        "tests/test.sh",
        "tests/task.json",
        "tests/lib/posttrainbench/task/evaluation/verify.py",
        "solution/solve.sh",
    ]:
        assert (task_dir / rel).exists(), rel
    assert (task_dir / "environment/workspace/templates").is_dir()
    # The agent's workspace must not carry the sealed verifier code or host-only code.
    assert not (task_dir / "environment/ptb/lib/posttrainbench/host/cli").exists()
    assert "ARG BASE_IMAGE" in (task_dir / "environment/Dockerfile").read_text()


def test_task_json_is_typed(task_dir: Path) -> None:
    spec = TaskSpec.model_validate_json((task_dir / "tests/task.json").read_text())
    assert spec.benchmark == "bfcl" and spec.model == "qwen3-1.7b" and spec.gpus == 1
    assert spec.model_source == "hf:Qwen/Qwen3-1.7B-Base"


def test_instruction_is_posttrainbench_prompt_then_notes(task_dir: Path) -> None:
    """The prompt itself is tests/unit/test_ptb_prompt.py's; here: what follows it."""
    text = (task_dir / "instruction.md").read_text()
    prompt, _, notes = text.partition("\n## About this environment\n")
    assert prompt.startswith("We want to train the small LLM \\`Qwen/Qwen3-1.7B-Base\\`")
    assert "equipped with an Nvidia H100 GPU" in prompt and "maximum of 10 hours" in prompt
    for needle in [
        "/app/final_model",
        "/opt/ptb/models/base",
        "unprivileged user `agent`",
        "python evaluate.py --limit N",
        "check_contamination.sh",
        "templates/",
    ]:
        assert needle in notes, needle


def test_timer_budget_matches_hours(tmp_path: Path) -> None:
    task = compile_task("bfcl", "smollm2-135m", tmp_path, CompileOptions(hours=0.5))
    assert "budget_s=1800" in (task / "environment/workspace/timer.sh").read_text()
    config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    assert config.environment.gpus == 0  # the offline model defaults to CPU


@pytest.mark.environment  # compiles every task with its layers (minutes under load)
def test_generate_all(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    benchmarks = [b.id for b in list_benchmarks()]
    for b in benchmarks:
        seed_prepared(cache, b)
    out = tmp_path / "tasks"
    result = run_ptb(
        "tasks", "generate", "--all", "--offline", "-o", str(out), env={"PTB_CACHE_DIR": str(cache)}
    )
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in out.iterdir())
    models = ["qwen3-1.7b", "qwen3-4b", "smollm3-3b", "gemma3-4b", "smollm2-135m"]
    assert names == sorted(f"{b}-{m}" for b in benchmarks for m in models)
    for name in names:
        Task(out / name)


def test_train_steps_sets_the_reference_solutions_training(tmp_path: Path) -> None:
    """A smoke task's oracle trains 2 steps instead of the solution's default."""
    cache = tmp_path / "cache"
    seed_prepared(cache, "bfcl")
    solve = "bfcl-smollm2-135m/solution/solve.sh"
    for steps, out in [(None, tmp_path / "default"), ("2", tmp_path / "smoke")]:
        extra = ["--train-steps", steps] if steps else []
        result = run_ptb(
            *["tasks", "generate", "-b", "bfcl", "-M", "smollm2-135m", "--offline"],
            *extra,
            *["-o", str(out)],
            env={"PTB_CACHE_DIR": str(cache)},
        )
        assert result.returncode == 0, result.stderr
    assert "--steps" not in (tmp_path / "default" / solve).read_text()
    assert "--steps 2 " in (tmp_path / "smoke" / solve).read_text()


def _split_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("feedback", ["test", "dev", "none"])
def test_feedback_modes_decide_what_the_agent_sees(tmp_path: Path, feedback: str) -> None:
    cache = tmp_path / "cache"
    seed_prepared(cache, "gsm8k", n=20)
    task = compile_task(
        "gsm8k",
        "smollm2-135m",
        tmp_path / "tasks",
        CompileOptions(hours=1, feedback=feedback, agent_eval_budget=3),
        cache_dir=cache,
        offline=True,
    )
    sealed = _split_ids(task / "tests/data/gsm8k/test.jsonl")
    agent_data = task / "environment/ptb/data/gsm8k"
    instruction = (task / "instruction.md").read_text()
    if feedback == "test":  # PostTrainBench parity: the agent evaluates on the scored set
        assert sealed == _split_ids(agent_data / "test.jsonl") and len(sealed) == 20
    elif feedback == "dev":  # a carved dev split; the final test set excludes it
        dev = _split_ids(agent_data / "dev.jsonl")
        assert dev and not set(dev) & set(sealed) and len(dev) + len(sealed) == 20
        assert not (agent_data / "test.jsonl").exists()
        assert "disjoint from the test set" in instruction and "at most\n  3 times" in instruction
    else:
        assert not agent_data.exists() and len(sealed) == 20
        assert "no score feedback" in instruction
    spec = TaskSpec.load(task / "environment/ptb/task.json")
    assert spec.feedback == feedback and spec.agent_eval_budget == 3


def test_llm_judged_benchmark_gets_judge_requirements_and_env(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    seed_prepared(cache, "healthbench")
    task = compile_task(
        "healthbench",
        "qwen3-1.7b",
        tmp_path / "tasks",
        CompileOptions(),
        cache_dir=cache,
        offline=True,
    )
    # The judge's client is its own layer's (ptb/requirements-judge.txt, build_judge.sh),
    # not the venv's: the venv's requirements are every task's on this stack.
    judge = task / "environment/ptb/requirements-judge.txt"
    assert "litellm==" in judge.read_text()
    assert os.access(task / "environment/ptb/build_judge.sh", os.X_OK)
    config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    assert config.verifier.env["OPENAI_API_KEY"] == "${OPENAI_API_KEY:-}"
    assert (
        "PTB_JUDGE_MODEL" in config.verifier.env
        and "PTB_INTEGRITY_JUDGE_MODEL" in config.verifier.env
    )
    plain = compile_task("bfcl", "qwen3-1.7b", tmp_path / "tasks", CompileOptions())
    assert "litellm" not in (plain / "environment/requirements.txt").read_text()
    assert (plain / "environment/requirements.txt").read_text() == (
        task / "environment/requirements.txt"
    ).read_text()
    assert not list((plain / "environment/ptb").glob("*judge*"))
    # Only PostTrainBench's agentic judges' settings (task/integrity/agentic, off while empty).
    assert set(
        TaskConfig.model_validate_toml((plain / "task.toml").read_text()).verifier.env
    ) == set(AGENTIC_ENV)


def test_offline_compile_without_prepared_data_is_one_clear_error(tmp_path: Path) -> None:
    result = run_ptb(
        "tasks",
        "generate",
        "-b",
        "gsm8k",
        "-M",
        "qwen3-1.7b",
        "--offline",
        "-o",
        str(tmp_path / "t"),
        env={"PTB_CACHE_DIR": str(tmp_path / "empty")},
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1 and "offline and not cached" in lines[0] and "ptb data prepare" in lines[0]
    )
    assert not (tmp_path / "t" / "gsm8k-qwen3-1.7b").exists()
