"""The contamination checker inside a compiled task: shipped, offline, with its reference."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from posttrainbench.host.tasks.compiler import AGENT_REFERENCE_NAME, compile_task
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.integrity.contamination.reference import load_reference
from posttrainbench.task.integrity.contamination.tokens import CL100K_CACHE_NAME
from tests.data_fixtures import seed_prepared
from tests.helpers import REPO


@pytest.mark.parametrize("feedback", ["test", "dev"])
def test_task_ships_checker_tokenizer_and_reference(tmp_path: Path, feedback: str) -> None:
    cache = tmp_path / "cache"
    seed_prepared(cache, "gsm8k", n=20)
    task = compile_task(
        "gsm8k",
        "qwen3-1.7b",
        tmp_path / "tasks",
        CompileOptions(feedback=feedback),
        cache_dir=cache,
        offline=True,
    )
    assert (task / "environment/ptb/tiktoken" / CL100K_CACHE_NAME).stat().st_size > 1_000_000
    assert (
        task / "environment/ptb/lib/posttrainbench/task/integrity/contamination/check.py"
    ).exists()
    assert (task / "tests/lib/posttrainbench/task/integrity/judges/run.py").exists()
    script = task / "environment/workspace/check_contamination.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    reference = task / "environment/ptb/data" / AGENT_REFERENCE_NAME
    instruction = (task / "instruction.md").read_text()
    assert "check_contamination.sh" in instruction
    if feedback == "test":
        # Exactly the test items the agent already sees, in PostTrainBench's TEST.json format.
        items = load_reference(reference)
        shown = [
            json.loads(line)["data"]
            for line in (task / "environment/ptb/data/gsm8k/test.jsonl").read_text().splitlines()
        ]
        assert [i.question for i in items] == [d["question"] for d in shown]
        assert json.loads(reference.read_text())[0].keys() == {"question", "answer"}
    else:
        assert not reference.exists()  # the agent must not get the sealed test set
        assert "--reference TEST.json" in instruction


def test_requirements_pin_the_checkers_dependencies() -> None:
    text = (REPO / "src/posttrainbench/task/evaluation/requirements.txt").read_text()
    for name in ("tiktoken==", "numpy==", "pyarrow=="):
        assert name in text
