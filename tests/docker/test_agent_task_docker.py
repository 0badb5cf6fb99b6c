"""The example agent task, compiled and run end to end under Harbor's Docker environment.

Needs a running Docker engine with the Compose v2 plugin and the offline CPU base image
(which carries git and the evaluation service's requirements, so the task's image builds
without the package index):

    scripts/docker/setup_engine.sh
    scripts/docker/build_base_image.sh

The same two trials and checks as the local-sandbox e2e test
(tests/agent_task_e2e_checks.py): the oracle (a scripted optimizer that
commits a better solver) and ``nop`` (the reward is the baseline's). The task keeps the
default ``network_mode = "public"``: every container has its own network namespace, so
the service's 127.0.0.1 port is private to the trial without Harbor's egress-control
sidecar (which ``no-network`` needs on Docker; its image is pulled from an image
registry, unreachable here).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from harbor.models.environment_type import EnvironmentType
from harbor.models.trial.config import EnvironmentConfig

from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from tests.agent_task_e2e_checks import EXAMPLE, check_oracle_and_nop, run_job
from tests.docker.engine import CPU_BASE_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _docker() -> EnvironmentConfig:
    # Docker refuses --cpus above the host's core count.
    return EnvironmentConfig(type=EnvironmentType.DOCKER, override_cpus=min(2, os.cpu_count() or 1))


def _compile_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    task = build_agent_task(
        EXAMPLE / "task.yaml", tmp_path / "tasks", BuildOptions(base_image=CPU_BASE_IMAGE)
    )
    assert f"ARG BASE_IMAGE={CPU_BASE_IMAGE}" in (task / "environment" / "Dockerfile").read_text()
    return task


def test_example_agent_task_image_builds_without_network(
    agent_task_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the base image the task's build installs nothing: no apt, no package index."""
    task = _compile_example(tmp_path, monkeypatch)
    tag = f"ptb-test/agent-task-offline:{uuid.uuid4().hex[:12]}"
    build = subprocess.run(
        ["docker", "build", "--network", "none", "-q", "-t", tag, str(task / "environment")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        # The service's interpreter imports its requirements; the private files are root-only.
        probe = (
            "/opt/ptb/venv/bin/python -c 'import fastapi, uvicorn, pydantic, yaml' "
            "&& stat -c '%u %a' /opt/ptb/agent-task/private"
        )
        run = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        owner, mode = run.stdout.split()
        assert owner == "0" and mode.endswith("00"), run.stdout
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


def test_example_agent_task_on_docker_oracle_beats_baseline_and_nop_keeps_it(
    agent_task_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _compile_example(tmp_path, monkeypatch)
    trials = run_job(
        task, tmp_path / "jobs", ["oracle", "nop"], _docker(), job_name="agent-task-docker"
    )
    check_oracle_and_nop(trials)


def test_declared_secret_on_docker_reaches_the_service_but_not_the_agent(
    agent_task_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`DockerTrialEnvironment` installs the secret root-only before the healthcheck."""
    from tests.integration.test_agent_task_secrets import CANARY, check_probe_trial, run_probe_trial
    from tests.unit.test_agent_task_compiler import make_config

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_TEST_SECRET", CANARY)
    config = make_config(tmp_path / "src", secrets=["PTB_TEST_SECRET"])
    task = build_agent_task(config, tmp_path / "tasks", BuildOptions(base_image=CPU_BASE_IMAGE))
    environment = EnvironmentConfig(
        import_path="posttrainbench.host.envs.docker_trial:DockerTrialEnvironment",
        override_cpus=min(2, os.cpu_count() or 1),
    )
    check_probe_trial(run_probe_trial(task, tmp_path / "jobs", environment))
