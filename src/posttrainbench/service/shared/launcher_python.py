"""The interpreter that runs our own small helpers as untrusted identities.

The helpers (``confine``, ``tar_stream``, ``probe``, the kill helper) are standard-library
only and run with ``-I -S`` (no environment, no site, no script or working directory on
``sys.path``), so any root-owned Python 3.11+ that every user may execute will do. The
service's own interpreter may live under a directory others cannot enter (a venv under
``/root``), hence the search.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path

from posttrainbench.service.shared.errors import ServiceStateError

_CANDIDATES = (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")
HELPERS_DIR = Path(__file__).resolve().parent  # confine.py, tar_stream.py, probe.py live here


def _runnable_by_anyone(path: Path) -> bool:
    """Root-owned, executable by others, and every directory above it enterable by others."""
    try:
        real = path.resolve(strict=True)
        info = real.stat()
    except OSError:
        return False
    if (
        info.st_uid != 0
        or not info.st_mode & stat.S_IXOTH
        or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return False
    for parent in real.parents:
        parent_info = parent.stat()
        if not parent_info.st_mode & stat.S_IXOTH or parent_info.st_uid != 0:
            return False
    return True


@functools.cache
def launcher_python() -> str:
    """The first root-owned Python any user can run (``ServiceStateError`` when there is none).

    A non-root service runs its helpers as itself: its own interpreter then does."""
    if os.geteuid() != 0:
        return sys.executable
    for candidate in _CANDIDATES:
        if candidate and _runnable_by_anyone(Path(candidate)):
            return str(Path(candidate).resolve())
    raise ServiceStateError(
        "no root-owned python3 that unprivileged users can run (tried "
        f"{', '.join(c for c in _CANDIDATES if c)})"
    )


def helper(name: str) -> str:
    """The path of one of our helper scripts (``confine.py`` ...)."""
    return str(HELPERS_DIR / name)
