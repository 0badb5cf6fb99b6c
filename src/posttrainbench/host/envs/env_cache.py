"""Content-addressed cache of a task's ``/opt/ptb``, built in layers like its image.

A task's ``environment/`` holds ``requirements.txt`` and a ``ptb/`` tree. Its layer
manifest (:mod:`posttrainbench.host.envs.layer_manifest`) splits them into layers, e.g. the
venv, the base model and the task's own files; a task without one is a single layer.
Each layer is built once into ``<cache>/envs/<name>-<sha256>``, keyed only on what it is
made from, so tasks that differ in their hours or benchmark share the venv and the model
and differ in a few MB. The local sandbox stacks an instance's layers read-only under its
own writable layer at ``/opt/ptb`` (:meth:`posttrainbench.host.envs.instance_fs.InstanceFs.setup_ptb`).
Each layer is built in a temporary directory and renamed into place under a lock of its
own, so concurrent trials never build a layer twice and a failed build leaves no entry.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.host.envs.cache_admin import (
    LayerHolds,
    build_dir_prefix,
    prune_to_cap,
    remove_orphan_builds,
)
from posttrainbench.host.envs.environment_needs import load_environment_needs
from posttrainbench.host.envs.layer_build import (  # noqa: F401  (the cache's errors and paths, for its callers)
    BUILD_LOG_NAME,
    SANDBOX_PTB_ROOT,
    EnvironmentBuildError,
    build_layer,
)
from posttrainbench.host.envs.layer_manifest import LayerSpec, load_layers

KEY_VERSION = b"ptb-layer-v1"
"""Changes every key: bump it when the way layers are built changes."""


@dataclass(frozen=True)
class SandboxPython:
    """The interpreter that task venvs are created from.

    ``prefix`` is the interpreter's install dir; it is bound read-only at the same path
    inside the sandbox because the venv's ``python`` symlinks into it.
    """

    executable: Path
    prefix: Path
    version: str


def cache_root() -> Path:
    """Return the cache directory (``$PTB_CACHE_DIR`` or ``~/.cache/posttrainbench``)."""
    override = os.environ.get("PTB_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "posttrainbench"


def _candidate_pythons(min_version: tuple[int, int] | None = None) -> list[str]:
    explicit = os.environ.get("PTB_SANDBOX_PYTHON")
    if min_version is None:
        if explicit:
            return [explicit]
        candidates: list[str] = []
        if shutil.which("python3.11"):
            candidates.append("python3.11")
        candidates.extend(sorted(glob.glob("/root/.pyenv/versions/3.11*/bin/python3.11")))
        candidates.append("python3")
        return candidates
    # A task that needs a newer Python (an agent task that runs Harbor inside) takes the
    # lowest that qualifies: the explicit one, one on PATH, a pyenv install, and last the
    # harness's own base interpreter (Harbor needs >= 3.12, so it qualifies for 3.12).
    major, minor = min_version
    candidates = [explicit] if explicit else []
    candidates += [
        f"python{major}.{m}" for m in range(minor, 20) if shutil.which(f"python{major}.{m}")
    ]
    pyenv = {
        path: version
        for path in glob.glob(f"/root/.pyenv/versions/{major}.*/bin/python{major}.*[0-9]")
        if (version := _version_in_path(path)) is not None and version >= min_version
    }
    candidates += sorted(pyenv, key=lambda path: pyenv[path])
    candidates.append(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    return list(dict.fromkeys(candidates))


def _version_in_path(path: str) -> tuple[int, int] | None:
    """``(3, 12)`` for ``.../bin/python3.12`` (pyenv candidates are chosen by it)."""
    name = os.path.basename(path).removeprefix("python")
    parts = name.split(".")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1])


def resolve_sandbox_python(min_version: tuple[int, int] | None = None) -> SandboxPython:
    """Find the sandbox interpreter (``PTB_SANDBOX_PYTHON``, else python3.11, else python3).

    The interpreter is asked for its real executable and prefix, so a pyenv shim on PATH
    resolves to the actual install that must be visible inside the sandbox. With
    ``min_version`` (a task's ``min_python``), only an interpreter at least that new is
    taken: ``PTB_SANDBOX_PYTHON`` if it is, else ``python3.N`` on PATH, else a pyenv
    install, else the harness's own base interpreter; none raises
    :class:`EnvironmentBuildError`.

    The same interpreter whatever the command and its directory: a pyenv shim picks its
    version by the working directory's ``.python-version`` and ``$PYENV_VERSION``, so two
    commands run from two directories built every layer twice. The probe runs from ``/``
    with ``PYENV_VERSION=system``: the system's ``python3.11`` (what a shim gave in this
    repository, whose ``.python-version`` names 3.12), else the lowest pyenv 3.11 install;
    ``PTB_SANDBOX_PYTHON`` chooses another.
    """
    probe = (
        "import json,sys,os;print(json.dumps({'exe':os.path.realpath(sys.executable),"
        "'prefix':os.path.realpath(sys.base_prefix),'version':sys.version,"
        "'info':list(sys.version_info[:2])}))"
    )
    errors: list[str] = []
    for candidate in _candidate_pythons(min_version):
        try:
            out = subprocess.run(
                [candidate, "-c", probe],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
                cwd="/",
                env={**os.environ, "PYENV_VERSION": "system"},
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        info = json.loads(out.strip().splitlines()[-1])
        if min_version is not None and tuple(info["info"]) < min_version:
            errors.append(f"{candidate}: Python {info['info'][0]}.{info['info'][1]}")
            continue
        return SandboxPython(
            executable=Path(info["exe"]),
            prefix=Path(info["prefix"]),
            version=info["version"],
        )
    if min_version is not None:
        wanted = f"{min_version[0]}.{min_version[1]}"
        raise EnvironmentBuildError(
            f"The task needs a sandbox Python >= {wanted} and none was found (set "
            f"PTB_SANDBOX_PYTHON to one): " + "; ".join(errors)
        )
    raise EnvironmentBuildError(
        "No usable sandbox Python found (set PTB_SANDBOX_PYTHON): " + "; ".join(errors)
    )


def resolve_task_python(environment_dir: Path) -> SandboxPython:
    """:func:`resolve_sandbox_python` for a task: at least the ``min_python`` its
    ``ptb-environment.json`` asks for. Whoever plans or builds a task's layers outside the
    sandbox (a prebuild) uses this, so its keys are the ones the sandbox will look up."""
    needs = load_environment_needs(environment_dir)
    return resolve_sandbox_python(needs.min_python_version)


def _hash_path(digest: hashlib._Hash, path: Path, rel: str) -> None:
    if path.is_symlink():
        digest.update(f"L:{rel}->{os.readlink(path)}\0".encode())
    elif path.is_file():
        digest.update(f"F:{rel}:{os.access(path, os.X_OK)}\0".encode())
        digest.update(path.read_bytes())
        digest.update(b"\0")
    elif path.is_dir():
        digest.update(f"D:{rel}\0".encode())


def layer_key(
    environment_dir: Path, spec: LayerSpec, python: SandboxPython, venv_key: str | None = None
) -> str:
    """Hash the sandbox Python, the layer's spec and every path + content of its inputs.

    Nothing of the layers below and nothing else of the task enters it: a task that
    differs in a file no input names shares the layer. The exception is a layer that
    extends the venv: ``venv_key``, the venv layer's key, enters it (required there).
    """
    digest = hashlib.sha256()
    digest.update(KEY_VERSION + b"\0")
    digest.update(f"{python.executable}\0{python.version}\0".encode())
    digest.update(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode() + b"\0")
    if spec.extends_venv:
        if venv_key is None:
            raise ValueError(f"layer {spec.name!r} extends the venv: its key needs the venv's")
        digest.update(f"venv:{venv_key}\0".encode())
    for rel in spec.inputs:
        path = environment_dir / rel
        _hash_path(digest, path, rel)
        if path.is_dir() and not path.is_symlink():
            for sub in sorted(path.rglob("*")):
                _hash_path(digest, sub, f"{rel}/{sub.relative_to(path).as_posix()}")
    return digest.hexdigest()


@dataclass(frozen=True)
class Layer:
    """One layer of a task's environment and its cache entry (which may not exist yet)."""

    spec: LayerSpec
    key: str
    entry: Path

    @property
    def built(self) -> bool:
        """Whether the entry is in the cache (entries appear complete, by rename)."""
        return self.entry.is_dir()

    def build_logs(self) -> list[Path]:
        """The logs of builds of this layer in progress now (by this or another process)."""
        return sorted(self.entry.parent.glob(f".build-{self.entry.name[:40]}-*/{BUILD_LOG_NAME}"))


def plan_layers(
    environment_dir: Path, python: SandboxPython, root: Path | None = None
) -> list[Layer]:
    """The task's layers, bottom first, with their keys and cache entries (built or not).

    Raises :class:`~posttrainbench.host.envs.layer_manifest.LayerManifestError` for a bad manifest.
    """
    envs_dir = (root or cache_root()) / "envs"
    layers = []
    venv_key = None
    for spec in load_layers(environment_dir):
        key = layer_key(environment_dir, spec, python, venv_key)
        layers.append(Layer(spec, key, envs_dir / f"{spec.name}-{key}"))
        if spec.venv:
            venv_key = key
    return layers


def _ensure_layer(
    environment_dir: Path, layer: Layer, python: SandboxPython, lower_venv: Path | None
) -> bool:
    """Build ``layer`` unless it is in the cache; True if this call built it."""
    if layer.built:
        return False
    envs_dir = layer.entry.parent
    envs_dir.mkdir(parents=True, exist_ok=True)
    name = layer.entry.name
    with (envs_dir / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if layer.built:  # another process built it while we waited
            return False
        remove_orphan_builds(envs_dir, name)  # a killed build's; ours holds the lock now
        build_dir = Path(tempfile.mkdtemp(prefix=build_dir_prefix(name), dir=envs_dir))
        try:
            build_layer(environment_dir, layer.spec, build_dir, python.executable, lower_venv)
        except Exception as exc:
            failed = envs_dir / "failed"
            failed.mkdir(exist_ok=True)
            log_copy = failed / f"{name}.log"
            src_log = build_dir / BUILD_LOG_NAME
            if src_log.is_file():
                shutil.copyfile(src_log, log_copy)
            shutil.rmtree(build_dir, ignore_errors=True)
            raise EnvironmentBuildError(
                f"Building layer {layer.spec.name!r} of the task environment {environment_dir} failed: "
                f"{exc}. Build log: {log_copy}"
            ) from exc
        os.chmod(build_dir, 0o755)  # mkdtemp made it 0700; the agent's user reads /opt/ptb
        os.rename(build_dir, layer.entry)
        return True


def ensure_layers(
    environment_dir: Path,
    python: SandboxPython,
    root: Path | None = None,
) -> tuple[list[Path], list[str]]:
    """Return the task's cache entries, bottom first, and the names of the layers built now.

    Missing layers are built bottom up, each under its own lock: a concurrent builder of
    the same layer waits and reuses it. On failure the build log is kept under
    ``<cache>/envs/failed/<name>-<key>.log`` and named in the raised error.
    """
    layers = plan_layers(environment_dir, python, root)
    built: list[str] = []
    venv: Path | None = None
    # The build steps above the venv run its python (a judge layer's pip reads all of
    # it): held like a running trial's layer, so no prune removes it under them.
    venv_hold = LayerHolds([])
    try:
        for layer in layers:
            for _ in range(3):
                if _ensure_layer(environment_dir, layer, python, venv):
                    built.append(layer.spec.name)
                if not layer.spec.venv:
                    break
                venv_hold = LayerHolds([layer.entry])
                if venv_hold.acquire():
                    venv = layer.entry / "venv"
                    break
            else:
                raise EnvironmentBuildError(
                    f"the venv of {environment_dir} was pruned each time it was built"
                )
    finally:
        venv_hold.release()
    return [layer.entry for layer in layers], built


def acquire_layers(
    environment_dir: Path,
    python: SandboxPython,
    root: Path | None = None,
) -> tuple[list[Path], list[str], LayerHolds]:
    """:func:`ensure_layers`, then hold the entries for a running instance until it releases
    the returned holds: ``ptb cache prune`` never removes a held entry. A layer pruned
    between its build and its hold is built again. After a build, the cache is pruned to
    ``$PTB_CACHE_MAX_GB`` when that is set.
    """
    for _ in range(3):
        entries, built = ensure_layers(environment_dir, python, root)
        holds = LayerHolds(entries)
        if holds.acquire():
            if built:
                prune_to_cap(entries[0].parent)
            return entries, built, holds
    raise EnvironmentBuildError(
        f"the layers of {environment_dir} were pruned each time they were built"
    )
