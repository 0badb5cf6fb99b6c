"""One real Harbor trial of a compiled task (bfcl x smollm2-135m) on the Docker engine.

Needs a running Docker engine with the Compose v2 plugin and the offline CPU base image:

    scripts/docker/setup_engine.sh
    scripts/docker/build_base_image.sh

The task is compiled with the CPU base image as its Dockerfile's default ``BASE_IMAGE``
(``CompileOptions.base_image``): Harbor's docker environment builds without build args,
and a run-level compose overlay would not reach the separate verifier environment.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CPU_BASE_IMAGE = os.environ.get("PTB_BASE_IMAGE", "posttrainbench/cpu-base:bookworm")
BENCHMARK, MODEL = "bfcl", "smollm2-135m"
TRIAL_CPUS = 2
TRIAL_MEMORY_GB = 8


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _skip_reason() -> str | None:
    """Why this machine cannot run the trial, or None when it can."""
    if shutil.which("docker") is None:
        return "docker CLI not installed (run scripts/docker/setup_engine.sh)"
    try:
        if _docker("info").returncode != 0:
            return "`docker info` failed: no Docker engine (run scripts/docker/setup_engine.sh)"
        if _docker("compose", "version").returncode != 0:
            return "no Docker Compose v2 plugin (run scripts/docker/setup_engine.sh)"
        if _docker("image", "inspect", CPU_BASE_IMAGE).returncode != 0:
            return f"base image {CPU_BASE_IMAGE} missing (run scripts/docker/build_base_image.sh)"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker unusable: {exc}"
    return None


@pytest.fixture(scope="module")
def docker_ready() -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)


def _compile(out: Path) -> Path:
    from posttrainbench.tasks.compiler import compile_task
    from posttrainbench.tasks.options import CompileOptions

    options = CompileOptions(
        hours=0.25,
        cpus=TRIAL_CPUS,
        memory_gb=TRIAL_MEMORY_GB,
        final_eval_limit=2,
        agent_eval_limit=2,
        score_base_model=False,
        solution_minutes=1,
        verifier_timeout_min=15,
        base_image=CPU_BASE_IMAGE,
    )
    return compile_task(BENCHMARK, MODEL, out, options)


def test_oracle_trial_on_docker(docker_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_BASE_IMAGE", CPU_BASE_IMAGE)
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    task = _compile(tmp_path / "tasks")
    assert f"ARG BASE_IMAGE={CPU_BASE_IMAGE}" in (task / "environment" / "Dockerfile").read_text()

    config = JobConfig(
        job_name="docker-trial",
        jobs_dir=tmp_path / "jobs",
        n_concurrent_trials=1,
        quiet=True,
        agents=[AgentConfig(name="oracle")],
        tasks=[TaskConfig(path=task)],
        environment=EnvironmentConfig(
            type="docker",
            # Docker refuses --cpus above the host's core count; never ask for more.
            override_cpus=min(TRIAL_CPUS, os.cpu_count() or 1),
            override_memory_mb=TRIAL_MEMORY_GB * 1024,
        ),
    )

    async def run() -> object:
        job = await Job.create(config)
        return await job.run()

    started = time.monotonic()
    result = asyncio.run(run())
    elapsed = time.monotonic() - started

    (trial,) = result.trial_results  # type: ignore[attr-defined]
    trial_dir = Path(trial.trial_uri.removeprefix("file://"))
    assert trial.exception_info is None, trial.exception_info
    verifier = trial_dir / "verifier"
    reward_file = verifier / "reward.json"
    assert reward_file.is_file(), sorted(p.name for p in verifier.iterdir()) if verifier.exists() else trial_dir
    reward = json.loads(reward_file.read_text())["reward"]
    assert isinstance(reward, (int, float)) and math.isfinite(reward), reward
    error = verifier / "error.txt"
    assert not error.exists(), error.read_text() + (verifier / "test-stdout.txt").read_text()[-4000:]
    metrics = json.loads((verifier / "metrics.json").read_text())
    assert isinstance(metrics, dict) and metrics
    assert trial.verifier_result is not None
    assert trial.verifier_result.rewards is not None and "reward" in trial.verifier_result.rewards
    print(f"docker oracle trial: reward={reward} in {elapsed:.0f}s")
