"""How an untrusted command is started: its identity, its confinement, its environment,
its run directory; and how files come back from it.

A root service runs every candidate as a fresh uid (``identity``) through the launcher
(``confine``), with an allow-listed environment, so secrets and the admin token never
reach it. Its run directory is made by root for that run only: root owns the directory
itself (0711), the run's uid owns ``code/``, ``home/`` and ``tmp/`` inside, and root
never enters them while anything of that uid runs. Files come back through
``posttrainbench.core.safe_fs``, which never follows a link the candidate planted.
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

from posttrainbench.service.shared.config import CandidateLimits, ScoringModeA
from posttrainbench.service.shared.errors import ServiceStateError
from posttrainbench.service.shared.identity import Identity
from posttrainbench.service.shared.launcher_python import helper, launcher_python

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
            assert identity.uid is not None and identity.gid is not None  # switches says so
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
