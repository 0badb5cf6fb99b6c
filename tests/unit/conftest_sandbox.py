"""Fixtures for the local sandbox tests (imported explicitly by those test modules)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

from posttrainbench.envs.local_sandbox import LocalSandboxEnvironment


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


def write_light_task_env(root: Path, compiled: Path, scripts: list[str]) -> Path:
    """A compiled task's ``ptb/`` scripts and in-sandbox code, in an environment without its
    heavy requirements (only pydantic, at the task's pin): builds in seconds.

    ``scripts`` are paths below the compiled ``environment/`` (``ptb/collect.sh``, ...).
    """
    env_dir = write_task_env(root)
    pin = next(
        line
        for line in (compiled / "environment" / "requirements.txt").read_text().splitlines()
        if line.startswith("pydantic==")
    )
    (env_dir / "requirements.txt").write_text(pin + "\n")
    shutil.rmtree(env_dir / "ptb" / "lib")
    shutil.copytree(compiled / "environment" / "ptb" / "lib", env_dir / "ptb" / "lib")
    for rel in scripts:
        shutil.copyfile(compiled / "environment" / rel, env_dir / rel)
    return env_dir


@pytest.fixture(scope="module")
def sandbox_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One PTB_CACHE_DIR shared by a test module, so the venv is built once."""
    cache = tmp_path_factory.mktemp("ptb-cache")
    previous = os.environ.get("PTB_CACHE_DIR")
    os.environ["PTB_CACHE_DIR"] = str(cache)
    yield cache
    if previous is None:
        os.environ.pop("PTB_CACHE_DIR", None)
    else:
        os.environ["PTB_CACHE_DIR"] = previous


@pytest.fixture(scope="module")
def task_env_dir(tmp_path_factory: pytest.TempPathFactory, sandbox_cache: Path) -> Path:
    """A shared task environment dir (empty requirements, a tiny build.sh)."""
    root = tmp_path_factory.mktemp("task")
    return write_task_env(
        root, build_sh="mkdir -p $PTB_ROOT/models && echo base > $PTB_ROOT/models/base\n"
    )


MakeEnv = Callable[..., LocalSandboxEnvironment]


@pytest.fixture
def make_env(tmp_path: Path, task_env_dir: Path) -> MakeEnv:
    """Factory for environment instances of one trial (``session`` picks the role)."""
    trial_paths = TrialPaths(tmp_path / "trial")
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
