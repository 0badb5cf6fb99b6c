"""Map `--env` names to Harbor environment configurations."""

from __future__ import annotations

import os

from harbor.models.trial.config import EnvironmentConfig

from posttrainbench.core.errors import RunError

LOCAL_SANDBOX = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
# Harbor's Docker plus the trial contract: secrets, a hard agent deadline, link-free downloads.
DOCKER_TRIAL = "posttrainbench.host.envs.docker_trial:DockerTrialEnvironment"
# Harbor's cloud environments with the trial contract (final_model volume, exact GPU).
CLOUD_ENVS = {
    "modal": "posttrainbench.host.envs.modal_trial:ModalTrialEnvironment",
    "daytona": "posttrainbench.host.envs.daytona_trial:DaytonaTrialEnvironment",
}
ENV_NAMES = ("local", "docker", "modal", "daytona")


def harbor_environment(
    name: str,
    *,
    cpus: int | None = None,
    memory_mb: int | None = None,
    cache_volume: str | None = None,
    agent_clis: bool = False,
) -> EnvironmentConfig:
    """The Harbor environment config for `name`, with optional resource overrides.

    Overrides let a task compiled for a 16-core, 128 GB cloud machine run on a smaller
    local machine without recompiling it. *cache_volume* (Modal, Daytona) is mounted
    read-only at /ptb-cache. *agent_clis* (local) installs the task's pinned agent CLIs
    into the sandbox (posttrainbench.host.envs.agent_clis); images carry them already.
    """
    if name not in ENV_NAMES:
        raise RunError(f"unknown environment {name!r}; choose one of: {', '.join(ENV_NAMES)}")
    if cache_volume is not None and name not in CLOUD_ENVS:
        raise RunError(f"a cache volume needs --env {' or '.join(CLOUD_ENVS)}, not {name}")
    overrides = {"override_cpus": cpus, "override_memory_mb": memory_mb}
    if name == "local":
        local_kwargs = {"agent_clis": True} if agent_clis else {}
        return EnvironmentConfig(import_path=LOCAL_SANDBOX, kwargs=local_kwargs, **overrides)
    if name == "docker":
        return EnvironmentConfig(import_path=DOCKER_TRIAL, **overrides)
    kwargs = {"cache_volume": cache_volume} if cache_volume else {}
    return EnvironmentConfig(import_path=CLOUD_ENVS[name], kwargs=kwargs, **overrides)


def local_resources() -> tuple[int, int]:
    """This machine's CPU count and memory in MB, for runs on local environments."""
    cpus = os.cpu_count() or 1
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return cpus, pages // (1024 * 1024)
