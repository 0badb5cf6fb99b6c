"""The Docker engine the docker tier needs, and the small task its tests run (the fixtures
that skip without them are in tests/docker/conftest.py).

Needs a running Docker engine with the Compose v2 plugin and the offline CPU base image:

    scripts/docker/setup_engine.sh
    scripts/docker/build_base_image.sh
"""

from __future__ import annotations

import os
import shutil
import subprocess

CPU_BASE_IMAGE = os.environ.get("PTB_BASE_IMAGE", "posttrainbench/cpu-base:bookworm")
BENCHMARK, MODEL = "bfcl", "smollm2-135m"
TRIAL_CPUS = 2
TRIAL_MEMORY_GB = 8


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def engine_skip_reason() -> str | None:
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


def agent_task_skip_reason() -> str | None:
    """Why the base image cannot build an agent task offline, or None when it can."""
    probe = "command -v git && command -v setpriv && command -v pkill && python3 -c 'import fastapi, uvicorn, yaml'"
    try:
        if (
            _docker(
                "run", "--rm", "--network", "none", CPU_BASE_IMAGE, "sh", "-c", probe
            ).returncode
            != 0
        ):
            return (
                f"base image {CPU_BASE_IMAGE} lacks git or the evaluation service's requirements "
                "(rerun scripts/docker/build_base_image.sh)"
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker unusable: {exc}"
    return None
