"""How an untrusted command is started: its identity, its confinement, its environment,
its run directory; and how files come back from it.

A root service runs every candidate as a fresh uid (``identity``) through the launcher
(``confine``), with an allow-listed environment, so secrets and the admin token never
reach it. Its run directory is made by root for that run only: root owns the directory
itself (0711), the run's uid owns ``code/``, ``home/`` and ``tmp/`` inside, and root
never enters them while anything of that uid runs. Files come back with
:func:`copy_tree_safely`, which never follows a link the candidate planted.
"""

from __future__ import annotations

import atexit
import functools
import os
import resource
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.service.config import CandidateLimits, ScoringModeA
from posttrainbench.service.errors import ServiceStateError
from posttrainbench.service.identity import Identity
from posttrainbench.service.launcher_python import helper, launcher_python

_MB = 1 << 20


@dataclass(frozen=True)
class RunDir:
    """One run's directory: ``root`` (root's, 0711) holding ``code``, ``home`` and ``tmp`` (the run's)."""

    root: Path

    @property
    def code(self) -> Path:
        """Where the candidate's code is unpacked; the command's working directory."""
        return self.root / "code"

    @property
    def home(self) -> Path:
        """The run's HOME."""
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        """The run's TMPDIR (its private /tmp)."""
        return self.root / "tmp"


@functools.cache
def _default_runs_root() -> Path:
    path = Path(tempfile.mkdtemp(prefix="ptb-runs-"))
    atexit.register(_remove_if_empty, path)  # every run directory is deleted when its run ends
    return path


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def prepare_runs_root(path: Path | None) -> Path:
    """The parent of all run directories: root's (this process's), 0711, never a link.

    ``None``: this process's own, in the system temp dir (removed at exit). An existing path
    is accepted only when it is a real directory this process owns and nobody else may write.
    """
    path = _default_runs_root() if path is None else Path(path)
    path.mkdir(mode=0o711, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise ServiceStateError(
            f"runs directory {path} is not a directory of this service's own user"
        )
    os.chmod(path, 0o711)  # enterable by the runs' uids, not listable, writable by this user only
    return path


def make_run_dir(runs_root: Path, identity: Identity) -> RunDir:
    """A new run directory for *identity* (its uid owns the three empty subdirectories)."""
    run = RunDir(Path(tempfile.mkdtemp(prefix="run-", dir=runs_root)))
    os.chmod(run.root, 0o711)
    for sub in (run.code, run.home, run.tmp):
        sub.mkdir(mode=0o700)
        if identity.switches:
            # Fresh uid, nothing of it running yet, parent writable by root only: no race.
            os.chown(sub, identity.uid, identity.gid)
    return run


def remove_run_dir(run: RunDir) -> None:
    """Delete a run directory (call it only once nothing of the run's uid is left running)."""
    shutil.rmtree(run.root, ignore_errors=True)  # fd-based: never follows a link inside


def confined_argv(
    identity: Identity,
    argv: list[str],
    *,
    cwd: Path,
    writable: list[Path],
    limits: CandidateLimits,
    network: bool = False,
) -> list[str]:
    """*argv* started as *identity* through the launcher: limits, Landlock, seccomp, then exec."""
    processes = limits.max_processes
    if not identity.switches:
        # RLIMIT_NPROC counts every process of the uid: as the service's own user, keep its limit.
        processes = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        processes = processes if processes != resource.RLIM_INFINITY else 1 << 20
    launcher = [
        launcher_python(),
        "-I",
        "-S",
        helper("confine.py"),
        "--cwd",
        str(cwd),
        *[arg for path in writable for arg in ("--writable", str(path))],
        "--max-processes",
        str(processes),
        "--max-open-files",
        str(limits.max_open_files),
        "--max-file-bytes",
        str(limits.max_file_mb * _MB),
        *(["--network"] if network else []),
        "--",
        *argv,
    ]
    if not identity.switches:
        return launcher
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [
        setpriv,
        f"--reuid={identity.uid}",
        f"--regid={identity.gid}",
        "--clear-groups",
        "--no-new-privs",
        "--",
        *launcher,
    ]


def allowlisted_env(
    path: str, home: Path, pass_env: list[str], extra: dict[str, str] | None = None
) -> dict[str, str]:
    """A candidate process's whole environment: fixed basics, *extra*, and the *pass_env*
    variables this process has; never anything else of the service's own environment."""
    env = {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(extra or {}),
    }
    env.update({name: os.environ[name] for name in pass_env if name in os.environ})
    return env


def candidate_env(scoring: ScoringModeA, run: RunDir) -> dict[str, str]:
    """The Mode A candidate's whole environment: an allow-list, never the service's own variables."""
    return allowlisted_env(scoring.path, run.home, scoring.pass_env, {"TMPDIR": str(run.tmp)})


def copy_tree_safely(src: Path, dest: Path, budget: int, only: dict[str, str] | None = None) -> int:
    """Copy regular files and dirs from the candidate-owned *src* into *dest*; return the budget left.

    Every step goes through directory fds with ``O_NOFOLLOW`` and new files are created with
    ``O_EXCL``, so a link planted on either side (the candidate's dir, or the trial's agent
    dir that the environment may mount) is never followed and nothing is overwritten.
    *only* maps the top-level names to copy to their new names.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        src_fd = os.open(src, flags)
    except OSError:
        return budget
    try:
        dest_fd = os.open(dest, flags)
    except OSError:
        os.close(src_fd)
        return budget
    try:
        return _copy_level(src_fd, dest_fd, budget, only, depth=0)
    finally:
        os.close(src_fd)
        os.close(dest_fd)


def _copy_level(
    src_fd: int, dest_fd: int, budget: int, only: dict[str, str] | None, depth: int
) -> int:
    for name in sorted(os.listdir(src_fd)):
        target = name if only is None else only.get(name)
        if target is None or budget <= 0:
            continue
        try:
            st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and depth < 32:
            try:
                os.mkdir(target, 0o755, dir_fd=dest_fd)
            except FileExistsError:
                pass
            except OSError:
                continue
            try:
                sub_src = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
            except OSError:
                continue
            try:
                sub_dest = os.open(
                    target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dest_fd
                )
            except OSError:
                os.close(sub_src)
                continue
            try:
                budget = _copy_level(sub_src, sub_dest, budget, None, depth + 1)
            finally:
                os.close(sub_src)
                os.close(sub_dest)
        elif stat.S_ISREG(st.st_mode):
            budget -= _copy_file(src_fd, name, dest_fd, target, budget)
    return budget


def _copy_file(src_fd: int, name: str, dest_fd: int, target: str, limit: int) -> int:
    try:
        fd_in = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_fd)
    except OSError:
        return 0
    try:
        if not stat.S_ISREG(os.fstat(fd_in).st_mode):  # swapped for a fifo or device since the stat
            return 0
        try:
            fd_out = os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dest_fd
            )
        except OSError:
            return 0
        copied = 0
        try:
            while copied < limit:
                chunk = os.read(fd_in, min(1 << 20, limit - copied))
                if not chunk:
                    break
                os.write(fd_out, chunk)
                copied += len(chunk)
        finally:
            os.close(fd_out)
        return copied
    finally:
        os.close(fd_in)
