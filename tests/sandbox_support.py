"""Helpers of the local sandbox tests: task environment dirs and environment instances.

The fixtures built on them (``sandbox_cache``, ``task_env_dir``, ``make_env``) are in
``tests/conftest.py``.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

from posttrainbench.host.envs.local_sandbox import LocalSandboxEnvironment


def run[T](coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine (no pytest-asyncio in this project)."""
    return asyncio.run(coro)


def write_task_env(root: Path, build_sh: str = "", requirements: str = "") -> Path:
    """Write a task ``environment/`` dir with a workspace holding ``evaluate.py``."""
    env_dir = root / "environment"
    (env_dir / "ptb" / "lib").mkdir(parents=True)
    (env_dir / "workspace").mkdir()
    (env_dir / "Dockerfile").write_text("FROM scratch\n")
    (env_dir / "requirements.txt").write_text(requirements)
    (env_dir / "workspace" / "evaluate.py").write_text("print('pristine')\n")
    (env_dir / "ptb" / "lib" / "ptbhelper.py").write_text("VALUE = 42\n")
    if build_sh:
        (env_dir / "ptb" / "build.sh").write_text(build_sh)
    (root / "tests").mkdir()
    (root / "tests" / "secret.txt").write_text("sealed test data\n")
    return env_dir


def write_light_task_env(
    root: Path, compiled: Path, scripts: list[str], packages: tuple[str, ...] = ("pydantic",)
) -> Path:
    """A compiled task's ``ptb/`` scripts and in-sandbox code, in an environment without its
    heavy requirements (only *packages*, at the task's pins; pydantic by default): builds in
    seconds.

    ``scripts`` are paths below the compiled ``environment/`` (``ptb/collect.sh``, ...).
    """
    env_dir = write_task_env(root)
    pins = [
        line
        for line in (compiled / "environment" / "requirements.txt").read_text().splitlines()
        if line.split("==")[0] in packages
    ]
    assert len(pins) == len(packages), (packages, pins)
    (env_dir / "requirements.txt").write_text("\n".join(pins) + "\n")
    shutil.rmtree(env_dir / "ptb" / "lib")
    shutil.copytree(compiled / "environment" / "ptb" / "lib", env_dir / "ptb" / "lib")
    for rel in scripts:
        shutil.copyfile(compiled / "environment" / rel, env_dir / rel)
    return env_dir


MakeEnv = Callable[..., LocalSandboxEnvironment]


def env_factory(trial_dir: Path, task_env_dir: Path) -> MakeEnv:
    """Factory for environment instances of one trial (``session`` picks the role)."""
    trial_paths = TrialPaths(trial_dir)
    trial_paths.mkdir()

    def factory(
        session: str = "trial__env",
        env_dir: Path | None = None,
        network: NetworkMode = NetworkMode.PUBLIC,
        **kwargs: Any,
    ) -> LocalSandboxEnvironment:
        return LocalSandboxEnvironment(
            environment_dir=env_dir or task_env_dir,
            environment_name="t",
            session_id=session,
            trial_paths=trial_paths,
            task_env_config=EnvironmentConfig(),
            network_policy=NetworkPolicy(network_mode=network),
            **kwargs,
        )

    return factory


# The local sandbox tests need bubblewrap (`scripts/setup.sh` installs it).
requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed"
)
