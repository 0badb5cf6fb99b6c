"""`ptb data prepare`, `ptb baseline` and `ptb eval` end to end on the offline model (CPU, ~2 min).

The evaluation runs in the task-environment Python (.venv-task, built by scripts/test.sh)
through PTB_EVAL_PYTHON, exactly as a user's host runs it in its cached eval venv.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.task.schemas import Metrics
from tests.helpers import REPO, run_ptb

TASK_PYTHON = REPO / ".venv-task" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not TASK_PYTHON.exists(), reason="needs .venv-task (scripts/task_venv.sh)"),
]


def test_prepare_baseline_then_eval(tmp_path: Path) -> None:
    env = {"PTB_CACHE_DIR": str(tmp_path / "cache"), "PTB_EVAL_PYTHON": str(TASK_PYTHON)}
    prep = run_ptb("data", "prepare", "-b", "bfcl", "-M", "smollm2-135m", env=env)
    assert prep.returncode == 0, prep.stderr
    assert "bfcl: dev 20, test 100 (carved dev)" in prep.stdout
    model_dir = tmp_path / "cache" / "models" / "smollm2-135m"
    assert (model_dir / "config.json").is_file()
    manifest = json.loads((tmp_path / "cache/data/bfcl/manifest.json").read_text())
    assert manifest["splits"]["test"]["n"] == 100 and len(manifest["carved_dev_ids"]) == 20

    base = run_ptb(
        "baseline",
        "-b",
        "bfcl",
        "-M",
        "smollm2-135m",
        "--limit",
        "4",
        "-o",
        str(tmp_path / "b.json"),
        env=env,
    )
    assert base.returncode == 0, base.stderr
    baseline = Metrics.load(tmp_path / "b.json")
    assert baseline.n == 4 and baseline.split == "test" and baseline.attempts[0].ok
    # Kept where `ptb list baselines` finds it, with the machine and the date.
    listed = run_ptb("list", "baselines", "-b", "bfcl", "--json", env=env)
    (mine,) = [e for e in json.loads(listed.stdout) if "ptb baseline" in e["provenance"]]
    assert mine["score"] == baseline.accuracy and "first 4 questions only" in mine["provenance"]

    ev = run_ptb(
        "eval",
        "-b",
        "bfcl",
        "--model-path",
        str(model_dir),
        "--limit",
        "4",
        "--split",
        "dev",
        "-o",
        str(tmp_path / "m.json"),
        env=env,
    )
    assert ev.returncode == 0, ev.stderr
    metrics = Metrics.load(tmp_path / "m.json")
    assert metrics.split == "dev" and metrics.n == 4 and metrics.backend == "transformers"
    assert metrics.data_sha256 != baseline.data_sha256  # different questions
    assert metrics.model_sha256 == baseline.model_sha256  # same model
    assert "accuracy" in ev.stdout
