"""Who a candidate's command runs as, with which environment, and how its files come back.

When the service runs as root the candidate runs as an unprivileged user (``setpriv``
drops uid, gid and supplementary groups and sets no-new-privs); otherwise it runs as the
current user. Its environment is built from an allow-list, so secrets and the admin token
never reach it. Files go to it with :meth:`CandidateUser.hand_over` and come back with
:func:`copy_tree_safely`, which never follows a link the candidate planted.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from posttrainbench.optimize.config import ScoringModeA
from posttrainbench.optimize.errors import ServiceStateError


@dataclass(frozen=True)
class CandidateUser:
    """The identity a candidate runs under (``uid is None``: the current user, no switch)."""

    name: str
    uid: Optional[int] = None
    gid: Optional[int] = None

    @property
    def switches(self) -> bool:
        """Whether commands are wrapped to change user."""
        return self.uid is not None

    def wrap(self, argv: list[str]) -> list[str]:
        """*argv* prefixed so that it runs as this user."""
        if not self.switches:
            return argv
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        return [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--no-new-privs", "--", *argv]

    def hand_over(self, path: Path) -> None:
        """Give *path* (recursively) to this user so the candidate can work in its copy."""
        if not self.switches:
            return
        for root, dirs, files in os.walk(path):
            os.chown(root, self.uid, self.gid)
            for name in dirs + files:
                os.lchown(os.path.join(root, name), self.uid, self.gid)


def candidate_user(name: str) -> CandidateUser:
    """*name* when this process is root (it must exist and not be root), else the current user."""
    uid = os.geteuid()
    if uid != 0:
        try:
            return CandidateUser(name=pwd.getpwuid(uid).pw_name)
        except KeyError:  # a uid without a passwd entry (common in containers)
            return CandidateUser(name=str(uid))
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ServiceStateError(f"candidate user {name!r} does not exist") from None
    if entry.pw_uid == 0:
        raise ServiceStateError(f"candidate user {name!r} is root: candidates must run unprivileged")
    return CandidateUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def allowlisted_env(path: str, home: Path, pass_env: list[str],
                    extra: Optional[dict[str, str]] = None) -> dict[str, str]:
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


def candidate_env(scoring: ScoringModeA, home: Path) -> dict[str, str]:
    """The Mode A candidate's whole environment: an allow-list, never the service's own variables."""
    return allowlisted_env(scoring.path, home, scoring.pass_env)


def copy_tree_safely(src: Path, dest: Path, budget: int, only: Optional[dict[str, str]] = None) -> int:
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


def _copy_level(src_fd: int, dest_fd: int, budget: int, only: Optional[dict[str, str]], depth: int) -> int:
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
                sub_dest = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dest_fd)
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
            fd_out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dest_fd)
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
