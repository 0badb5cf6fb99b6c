"""Who a candidate's command runs as, and with which environment.

When the service runs as root the candidate runs as an unprivileged user (``setpriv``
drops uid, gid and supplementary groups and sets no-new-privs); otherwise it runs as the
current user. Its environment is built from an allow-list, so secrets and the admin token
never reach it.
"""

from __future__ import annotations

import os
import pwd
import shutil
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


def candidate_env(scoring: ScoringModeA, home: Path) -> dict[str, str]:
    """The candidate's whole environment: an allow-list, never the service's own variables."""
    env = {
        "PATH": scoring.path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update({name: os.environ[name] for name in scoring.pass_env if name in os.environ})
    return env
