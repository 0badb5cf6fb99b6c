"""One real Harbor trial of a compiled task (bfcl x smollm2-135m) on the Docker engine.

Needs a running Docker engine with the Compose v2 plugin and the offline CPU base image:

    scripts/docker/setup_engine.sh
    scripts/docker/build_base_image.sh

The task is compiled with the CPU base image as its Dockerfile's default ``BASE_IMAGE``
(``CompileOptions.base_image``): Harbor's docker environment builds without build args,
and a run-level compose overlay would not reach the separate verifier environment.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posttrainbench.schemas import Metrics
from tests.docker.engine import (  # noqa: F401 (docker_ready is a fixture)
    BENCHMARK, CPU_BASE_IMAGE, MODEL, TRIAL_CPUS, TRIAL_MEMORY_GB, docker_ready,
)
from tests.helpers import run_ptb

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_oracle_trial_with_harbor_run_on_docker(docker_ready: None, tmp_path: Path) -> None:
    """The README's commands: `ptb tasks generate`, then `harbor run -e docker`."""
    compiled = run_ptb(
        "tasks", "generate", "-b", BENCHMARK, "-m", MODEL, "--hours", "0.05",
        "--cpus", str(TRIAL_CPUS), "--memory-gb", str(TRIAL_MEMORY_GB), "--eval-limit", "2",
        "-o", str(tmp_path / "tasks"),
    )
    assert compiled.returncode == 0, compiled.stderr
    task = tmp_path / "tasks" / f"{BENCHMARK}-{MODEL}"
    # A task without GPUs defaults to the offline CPU base image.
    assert f"ARG BASE_IMAGE={CPU_BASE_IMAGE}" in (task / "environment" / "Dockerfile").read_text()

    harbor = Path(sys.executable).with_name("harbor")
    started = time.monotonic()
    result = subprocess.run(
        [str(harbor), "run", "-p", str(task), "-a", "oracle", "-e", "docker",
         # Docker refuses --cpus above the host's core count; never ask for more.
         "--override-cpus", str(min(TRIAL_CPUS, os.cpu_count() or 1)),
         "-o", str(tmp_path / "jobs"), "-y"],
        capture_output=True, text=True, timeout=1800, env={**os.environ, "HARBOR_TELEMETRY": "0"},
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    (result_file,) = [p for p in (tmp_path / "jobs").glob("*/*/result.json")]
    trial = json.loads(result_file.read_text())
    assert trial.get("exception_info") is None, trial["exception_info"]
    verifier = result_file.parent / "verifier"
    reward = json.loads((verifier / "reward.json").read_text())["reward"]
    assert isinstance(reward, (int, float)) and math.isfinite(reward), reward
    error = verifier / "error.txt"
    assert not error.exists(), error.read_text()
    metrics = Metrics.load(verifier / "metrics.json")
    assert metrics.n == 2 and metrics.error is None, metrics
    assert trial["verifier_result"]["rewards"]["reward"] == reward
    print(f"docker oracle trial: reward={reward} in {elapsed:.0f}s")
