"""Whether another process holds a ``flock`` on a file now, asked without waiting."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def lock_held(path: Path, *, shared_counts: bool) -> bool:
    """Whether a process holds a lock on *path* now (a missing file: no).

    *shared_counts*: a shared (reader's) lock counts too, so the probe asks for an exclusive
    lock; otherwise only an exclusive lock counts, and the probe asks for a shared one. The
    probe's own lock, when it got one, is dropped at once by closing its fd."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if shared_counts else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
