"""Building one layer of a task's ``/opt/ptb`` on the host, for the local sandbox's cache.

Like a Dockerfile's ``COPY`` + ``RUN``: the layer's inputs are copied in, a venv layer gets
``venv/`` from the sandbox Python and its requirements, then the layer's build step runs
with ``PTB_ROOT`` at the layer (a layer that extends the venv installs into its own
``venv/``, which the sandbox stacks over the venv layer's). The caller builds into a temporary dir and renames it
into the cache (:func:`posttrainbench.host.envs.env_cache.ensure_layers`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.envs.layer_manifest import LayerSpec, destination

SANDBOX_PTB_ROOT = MODEL_LAYOUT.root
"""Where the stacked layers appear inside the sandbox."""

BUILD_LOG_NAME = "build.log"

# Host variables that would point a build step's Python at the harness's own packages.
_DROPPED_ENV = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE")


class EnvironmentBuildError(RuntimeError):
    """A layer of the task environment could not be built (pip or a build step failed)."""


def _has_requirements(requirements: Path) -> bool:
    if not requirements.is_file():
        return False
    for line in requirements.read_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return True
    return False


def _run_logged(argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> int:
    with log.open("ab") as handle:
        handle.write(f"\n$ {' '.join(argv)}\n".encode())
        handle.flush()
        return subprocess.run(
            argv, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=cwd
        ).returncode


def _rewrite_venv_paths(venv: Path, built_at: str, final: str) -> None:
    """Point script shebangs and activate files at the in-sandbox venv path.

    The venv is created on the host in a temporary dir, but inside the sandbox it lives
    at ``/opt/ptb/venv``; console scripts (pip, ...) carry absolute shebangs. On the host
    they no longer run afterwards: later layers' build steps use ``python -m``.
    """
    old, new = built_at.encode(), final.encode()
    for path in (venv / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data and b"\0" not in data[:4096]:
            path.write_bytes(data.replace(old, new))
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        cfg.write_bytes(cfg.read_bytes().replace(old, new))


def _copy_input(source: Path, target: Path) -> None:
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def _drop_write_for_others(root: Path) -> None:
    """No file of a layer is writable by anyone but its owner (root): the agent's user
    must not change /opt/ptb, whatever mode a build step or pip left behind."""
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            mode = os.lstat(path).st_mode
            if not os.path.islink(path) and mode & 0o022:
                os.chmod(path, mode & 0o7755)


def _build_env(layer_dir: Path, venv: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    path = env.get("PATH", "/usr/bin:/bin")
    env["PATH"] = f"{venv / 'bin'}:{path}" if venv is not None else path
    env["PTB_ROOT"] = str(layer_dir)
    return env


def build_layer(
    environment_dir: Path,
    spec: LayerSpec,
    layer_dir: Path,
    interpreter: Path,
    lower_venv: Path | None,
) -> None:
    """Make layer ``spec`` of the task in ``environment_dir`` inside the empty ``layer_dir``.

    ``interpreter`` makes a venv layer's venv; ``lower_venv`` is the venv (in its final
    cache entry) whose ``python`` is first on PATH for an upper layer's build step. Raises
    :class:`EnvironmentBuildError` naming the failed step; its output is in ``build.log``.
    """
    log = layer_dir / BUILD_LOG_NAME
    log.touch()
    for rel in spec.inputs:
        _copy_input(environment_dir / rel, layer_dir / destination(rel))
    venv = layer_dir / "venv" if spec.venv else lower_venv
    env = _build_env(layer_dir, venv)
    if spec.venv:
        steps = [("python -m venv", [str(interpreter), "-m", "venv", str(layer_dir / "venv")])]
        if spec.requirements is not None and _has_requirements(environment_dir / spec.requirements):
            steps.append(
                (
                    f"pip install -r {spec.requirements}",
                    [
                        str(layer_dir / "venv" / "bin" / "python"),
                        "-m",
                        "pip",
                        "install",
                        "-r",
                        str(environment_dir / spec.requirements),
                    ],
                )
            )
        for what, argv in steps:
            if _run_logged(argv, log, env, layer_dir) != 0:
                raise EnvironmentBuildError(f"`{what}` failed")
    if spec.build is not None:
        script = layer_dir / destination(spec.build)
        if _run_logged(["bash", str(script)], log, env, layer_dir) != 0:
            raise EnvironmentBuildError(f"{spec.build} failed")
    if spec.venv:
        _rewrite_venv_paths(layer_dir / "venv", str(layer_dir / "venv"), MODEL_LAYOUT.venv)
    elif spec.extends_venv and lower_venv is not None and (layer_dir / "venv" / "bin").is_dir():
        # pip ran the venv below from its cache entry: the scripts it added name that python.
        _rewrite_venv_paths(layer_dir / "venv", str(lower_venv), MODEL_LAYOUT.venv)
    _drop_write_for_others(layer_dir)
