"""The agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode) for the local sandbox.

A model task carries ``environment/agent_clis/``: a ``package.json`` of the pinned CLIs,
its ``package-lock.json`` and ``install.sh``. On a trial started with ``agent_clis=True``
(``ptb run`` and ``ptb agents check`` set it for these agents; by hand:
``harbor run --ek agent_clis=true``), the sandbox installs them once per cache, keyed on
those three files, into ``<cache>/envs/agent_clis-<key>`` with the host's npm (from the
npm registry, outside the agent's clock), and binds that tree read-only at
``/opt/agent-clis``; its ``node_modules/.bin`` is on every sandboxed command's PATH.
Harbor's installed agents then find the CLI at the pinned version and skip their own
download, which a sandbox without the internet could not do.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.envs.layer_build import BUILD_LOG_NAME, EnvironmentBuildError

TASK_DIR_NAME = "agent_clis"
"""Where a task's CLI pins live, relative to its ``environment/``."""
INPUT_FILES = ("package.json", "package-lock.json", "install.sh")
SANDBOX_AGENT_CLIS = MODEL_LAYOUT.agent_clis
SANDBOX_AGENT_BIN = MODEL_LAYOUT.agent_clis_bin
ENTRY_PREFIX = "agent_clis-"
INSTALL_TIMEOUT_S = 1800
# The host's npm needs its own settings (registry, proxy, cache) but none of the
# harness's Python variables.
_DROPPED_ENV = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")


class AgentClisError(EnvironmentBuildError):
    """The task has no agent CLI pins, or installing them failed."""


def agent_clis_key(environment_dir: Path) -> str:
    """The cache key of a task's agent CLIs: a hash of its pins, lock file and install step."""
    source = environment_dir / TASK_DIR_NAME
    digest = hashlib.sha256(b"ptb-agent-clis-v1\0")
    for name in INPUT_FILES:
        path = source / name
        if not path.is_file():
            raise AgentClisError(
                f"the task {environment_dir.parent} has no {TASK_DIR_NAME}/{name}: "
                "recompile it with this version of posttrainbench to run an agent CLI in it"
            )
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def ensure_agent_clis(environment_dir: Path, envs_dir: Path) -> tuple[Path, bool]:
    """The cache entry holding the task's agent CLIs, installed now if missing (under a
    lock, so concurrent trials install once); True when this call installed it."""
    entry = envs_dir / f"{ENTRY_PREFIX}{agent_clis_key(environment_dir)}"
    if entry.is_dir():
        return entry, False
    envs_dir.mkdir(parents=True, exist_ok=True)
    with (envs_dir / f"{entry.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if entry.is_dir():
            return entry, False
        build_dir = Path(tempfile.mkdtemp(prefix=f".build-{entry.name}-", dir=envs_dir))
        try:
            _install(environment_dir / TASK_DIR_NAME, build_dir)
        except AgentClisError as exc:
            failed = envs_dir / "failed"
            failed.mkdir(exist_ok=True)
            log = failed / f"{entry.name}.log"
            if (build_dir / BUILD_LOG_NAME).is_file():
                shutil.copyfile(build_dir / BUILD_LOG_NAME, log)
            shutil.rmtree(build_dir, ignore_errors=True)
            raise AgentClisError(f"{exc}; install log: {log}") from exc
        os.chmod(build_dir, 0o755)  # mkdtemp made it 0700; the agent's user runs the CLIs
        os.rename(build_dir, entry)
        return entry, True


def _install(source: Path, build_dir: Path) -> None:
    for name in INPUT_FILES:
        shutil.copy2(source / name, build_dir / name)
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    log = build_dir / BUILD_LOG_NAME
    with log.open("wb") as handle:
        try:
            result = subprocess.run(
                ["bash", str(build_dir / "install.sh")],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=build_dir,
                timeout=INSTALL_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AgentClisError(f"installing the agent CLIs failed: {exc}") from exc
    if result.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise AgentClisError(f"installing the agent CLIs failed: {tail[0]}")
