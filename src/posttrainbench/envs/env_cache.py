"""Content-addressed cache of built task environments (venv + ``ptb/`` support files).

A task's ``environment/`` directory holds ``requirements.txt`` and a ``ptb/`` tree. They
are built once into ``<cache>/envs/<sha256>`` and then mounted read-only (through a
per-instance writable layer) at ``/opt/ptb`` in every sandbox that uses that task.
Builds happen in a temporary directory and are renamed into place, under a file lock,
so concurrent trials never build twice and a failed build never leaves a cache entry.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SANDBOX_PTB_ROOT = "/opt/ptb"
"""Where the cached build appears inside the sandbox."""

BUILD_LOG_NAME = "build.log"


class EnvironmentBuildError(RuntimeError):
    """The task environment could not be built (pip or ``ptb/build.sh`` failed)."""


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


def _candidate_pythons() -> list[str]:
    explicit = os.environ.get("PTB_SANDBOX_PYTHON")
    if explicit:
        return [explicit]
    candidates: list[str] = []
    if shutil.which("python3.11"):
        candidates.append("python3.11")
    candidates.extend(sorted(glob.glob("/root/.pyenv/versions/3.11*/bin/python3.11")))
    candidates.append("python3")
    return candidates


def resolve_sandbox_python() -> SandboxPython:
    """Find the sandbox interpreter (``PTB_SANDBOX_PYTHON``, else python3.11, else python3).

    The interpreter is asked for its real executable and prefix, so a pyenv shim on PATH
    resolves to the actual install that must be visible inside the sandbox.
    """
    probe = (
        "import json,sys,os;print(json.dumps({'exe':os.path.realpath(sys.executable),"
        "'prefix':os.path.realpath(sys.base_prefix),'version':sys.version}))"
    )
    errors: list[str] = []
    for candidate in _candidate_pythons():
        try:
            out = subprocess.run(
                [candidate, "-c", probe],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        info = json.loads(out.strip().splitlines()[-1])
        return SandboxPython(
            executable=Path(info["exe"]),
            prefix=Path(info["prefix"]),
            version=info["version"],
        )
    raise EnvironmentBuildError(
        "No usable sandbox Python found (set PTB_SANDBOX_PYTHON): " + "; ".join(errors)
    )


def compute_cache_key(environment_dir: Path, python: SandboxPython) -> str:
    """Hash requirements.txt, every path+content under ``ptb/`` and the Python version."""
    digest = hashlib.sha256()
    digest.update(b"ptb-env-v1\0")
    digest.update(python.version.encode() + b"\0")
    requirements = environment_dir / "requirements.txt"
    digest.update(requirements.read_bytes() if requirements.is_file() else b"")
    digest.update(b"\0")
    ptb_dir = environment_dir / "ptb"
    if ptb_dir.is_dir():
        for path in sorted(ptb_dir.rglob("*")):
            rel = path.relative_to(ptb_dir).as_posix()
            if path.is_symlink():
                digest.update(f"L:{rel}->{os.readlink(path)}\0".encode())
            elif path.is_file():
                digest.update(f"F:{rel}:{os.access(path, os.X_OK)}\0".encode())
                digest.update(path.read_bytes())
                digest.update(b"\0")
            elif path.is_dir():
                digest.update(f"D:{rel}\0".encode())
    return digest.hexdigest()


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
    at ``/opt/ptb/venv``; console scripts (pip, ...) carry absolute shebangs.
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


def _build(environment_dir: Path, build_dir: Path, python: SandboxPython) -> None:
    log = build_dir / BUILD_LOG_NAME
    ptb_src = environment_dir / "ptb"
    if ptb_src.is_dir():
        shutil.copytree(ptb_src, build_dir, symlinks=True, dirs_exist_ok=True)
    log.touch()
    venv = build_dir / "venv"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["PTB_ROOT"] = str(build_dir)
    steps: list[list[str]] = [[str(python.executable), "-m", "venv", str(venv)]]
    requirements = environment_dir / "requirements.txt"
    if _has_requirements(requirements):
        steps.append(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-r", str(requirements)]
        )
    for argv in steps:
        if _run_logged(argv, log, env, build_dir) != 0:
            raise EnvironmentBuildError(f"`{argv[2]} {argv[3]}` failed")
    build_sh = build_dir / "build.sh"
    if build_sh.is_file():
        if _run_logged(["bash", str(build_sh)], log, env, build_dir) != 0:
            raise EnvironmentBuildError("ptb/build.sh failed")
    _rewrite_venv_paths(venv, str(venv), f"{SANDBOX_PTB_ROOT}/venv")


def ensure_built(
    environment_dir: Path,
    python: SandboxPython,
    root: Path | None = None,
) -> tuple[Path, bool]:
    """Return ``(cache entry, built_now)``, building the entry if it does not exist yet.

    The lock file serialises builders of the same key; the build dir is only renamed to
    its final name after every step succeeded. On failure the build log is kept under
    ``<cache>/envs/failed/<key>.log`` and named in the raised error.
    """
    envs_dir = (root or cache_root()) / "envs"
    envs_dir.mkdir(parents=True, exist_ok=True)
    key = compute_cache_key(environment_dir, python)
    entry = envs_dir / key
    if entry.is_dir():
        return entry, False
    with (envs_dir / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if entry.is_dir():  # another process built it while we waited
            return entry, False
        build_dir = Path(tempfile.mkdtemp(prefix=f".build-{key[:12]}-", dir=envs_dir))
        try:
            _build(environment_dir, build_dir, python)
        except Exception as exc:
            failed = envs_dir / "failed"
            failed.mkdir(exist_ok=True)
            log_copy = failed / f"{key}.log"
            src_log = build_dir / BUILD_LOG_NAME
            if src_log.is_file():
                shutil.copyfile(src_log, log_copy)
            shutil.rmtree(build_dir, ignore_errors=True)
            raise EnvironmentBuildError(
                f"Building the task environment {environment_dir} failed: {exc}. "
                f"Build log: {log_copy}"
            ) from exc
        os.chmod(build_dir, 0o755)  # mkdtemp made it 0700; the agent's user reads /opt/ptb
        os.rename(build_dir, entry)
        return entry, True
