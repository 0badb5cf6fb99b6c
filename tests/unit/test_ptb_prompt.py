"""The agent's instruction is PostTrainBench's prompt as its own get_prompt.py renders it.

PostTrainBench's get_prompt.py, prompt.txt and benchmark.txt files are pinned unchanged in
tests/fixtures/posttrainbench/ (README.md there names the commit); the script runs there
as PostTrainBench runs it, from the repository root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.host.catalog import get_model, list_benchmarks, list_models
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.host.tasks.prompt import PROMPT_FILE, gpu_line
from posttrainbench.task.benchmarks.plugin import plugins
from tests.data_fixtures import seed_prepared

PTB = Path(__file__).resolve().parents[1] / "fixtures" / "posttrainbench"
NOTES = "\n## About this environment\n"


def get_prompt(model: str, benchmark_id: str, hours: str, gpus: int) -> str:
    """PostTrainBench's get_prompt.py output, for its Claude agent (the Harbor adapter's)."""
    result = subprocess.run(
        [
            sys.executable,
            "src/eval/general/get_prompt.py",
            *("--agent", "claude", "--model-to-train", model),
            *("--benchmark-id", benchmark_id, "--num-hours", hours, "--num-gpus", str(gpus)),
        ],
        cwd=PTB,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_the_shipped_prompt_is_posttrainbenchs_file() -> None:
    assert PROMPT_FILE.read_bytes() == (PTB / "src/eval/general/prompt.txt").read_bytes()


def test_every_benchmark_has_posttrainbenchs_name() -> None:
    for benchmark_id, plugin in plugins().items():
        ptb = plugin.posttrainbench
        assert ptb is not None, benchmark_id
        name = (PTB / "src/eval/tasks" / benchmark_id / "benchmark.txt").read_text().strip()
        assert plugin.prompt_name == name


@pytest.mark.parametrize("benchmark", [b.id for b in list_benchmarks()])
@pytest.mark.parametrize("hours,gpus", [(10.0, 1), (0.5, 2)])
def test_instruction_equals_get_prompt(
    benchmark: str, hours: float, gpus: int, tmp_path: Path
) -> None:
    """Every benchmark on a catalog GPU model: the prompt part is get_prompt.py's output."""
    cache = tmp_path / "cache"
    seed_prepared(cache, benchmark)
    task = compile_task(
        benchmark,
        "qwen3-4b",
        tmp_path / "tasks",
        CompileOptions(hours=hours, gpus=gpus),
        cache_dir=cache,
        offline=True,
    )
    text = (task / "instruction.md").read_text()
    prompt, notes, _ = text.partition(NOTES)
    assert notes and prompt == get_prompt("Qwen/Qwen3-4B-Base", benchmark, f"{hours:g}", gpus)


def test_the_listed_substitution_for_a_task_without_a_gpu(tmp_path: Path) -> None:
    """A CPU task: get_prompt.py's text with only its GPU line replaced (docs/parity.md)."""
    cache = tmp_path / "cache"
    seed_prepared(cache, "gsm8k")
    options = CompileOptions(hours=0.25, gpus=0, cpus=2, memory_gb=8)
    task = compile_task("gsm8k", "smollm2-135m", tmp_path, options, cache_dir=cache, offline=True)
    model = get_model("smollm2-135m").model_id
    expected = get_prompt(model, "gsm8k", "0.25", 1).replace(
        "- The machine is equipped with an Nvidia H100 GPU.",
        "- The machine has no GPU: 2 CPU cores and 8 GB of memory.",
    )
    assert (task / "instruction.md").read_text().partition(NOTES)[0] == expected


def test_model_ids_are_posttrainbenchs() -> None:
    ids = {m.id: m.model_id for m in list_models()}
    assert ids["qwen3-1.7b"] == "Qwen/Qwen3-1.7B-Base"
    assert ids["smollm3-3b"] == "HuggingFaceTB/SmolLM3-3B-Base"
    assert ids["gemma3-4b"] == "google/gemma-3-4b-pt"


def test_gpu_line() -> None:
    assert gpu_line(1, "H100", 16, 128) == "- The machine is equipped with an Nvidia H100 GPU."
    assert gpu_line(4, "H100", 16, 128) == "- The machine is equipped with 4 Nvidia H100 GPUs."
    assert gpu_line(1, "A100-80GB", 16, 128).endswith("an Nvidia A100-80GB GPU.")


def test_timer_says_what_posttrainbenchs_says(tmp_path: Path) -> None:
    """The same two lines as create_timer.sh's timer (here from the agent's own start)."""
    cache = tmp_path / "cache"
    seed_prepared(cache, "gsm8k")
    task = compile_task(
        "gsm8k", "smollm2-135m", tmp_path, CompileOptions(hours=2), cache_dir=cache, offline=True
    )
    timer = (task / "environment/workspace/timer.sh").read_text()
    ptb = (PTB / "src/utils/create_timer.sh").read_text()
    for words in ['echo "Timer expired!"', 'echo "Remaining time (hours:minutes)', "%d:%02d\\n"]:
        assert words in timer and words in ptb, words
