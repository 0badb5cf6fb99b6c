"""`ptb sweep --env docker`: a real sweep on the Docker engine, run twice; the second
run resumes it and runs nothing again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.docker.engine import (
    BENCHMARK,
    CPU_BASE_IMAGE,
    MODEL,
    TRIAL_CPUS,
    TRIAL_MEMORY_GB,
)
from tests.helpers import run_ptb

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_sweep_on_docker_runs_once_and_resumes(docker_ready: None, tmp_path: Path) -> None:
    args = (
        "sweep",
        "-b",
        BENCHMARK,
        "-M",
        MODEL,
        "-a",
        "nop",
        "--env",
        "docker",
        "--hours",
        "0.05",
        "--cpus",
        str(min(TRIAL_CPUS, os.cpu_count() or 1)),
        "--memory-gb",
        str(TRIAL_MEMORY_GB),
        "--eval-limit",
        "2",
        "--base-image",
        CPU_BASE_IMAGE,
        "-o",
        str(tmp_path / "sweep"),
    )
    first = run_ptb(*args, timeout=1800)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    (result,) = (tmp_path / "sweep" / "jobs" / "sweep").glob("*/result.json")
    trial = json.loads(result.read_text())
    assert trial.get("exception_info") is None, trial["exception_info"]
    assert trial["verifier_result"]["rewards"]["reward"] == 0.0  # nop saves no model: a score of 0
    second = run_ptb(*args, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert list((tmp_path / "sweep" / "jobs" / "sweep").glob("*/result.json")) == [result]
    assert json.loads(result.read_text()) == trial  # the finished trial is kept as it was
    status = json.loads(run_ptb("sweep", "status", str(tmp_path / "sweep"), "--json").stdout)
    (nop,) = status["agents"]
    # Done, not pending; no usable final_model is its outcome, not an error, and the retry
    # policy re-runs only infra and verifier errors.
    assert (nop["scored"], nop["no_model"], nop["errored"], nop["running"], nop["pending"]) == (
        0,
        1,
        0,
        0,
        0,
    )
