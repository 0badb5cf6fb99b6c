"""Output files named on the command line are checked before the work that fills them:
a typo in `-o` must not cost minutes of evaluation and then a traceback."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from posttrainbench.core.errors import OutputDirError


def check_output_file(path: Path, flag: str) -> None:
    """Raise OutputDirError (one line, exit 2) unless *path* can be written as a file."""
    if path.is_dir():
        raise OutputDirError(f"{flag} {path} is a directory; give a file name")
    parent = path.parent
    # The evaluation creates a missing directory itself: find the nearest one that exists.
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputDirError(f"{flag} {path}: {parent} is not a directory")
    # A real probe, not os.access: root "may write" /proc, yet nothing can be created there.
    try:
        fd, probe = tempfile.mkstemp(prefix=".ptb-probe-", dir=parent)
    except OSError as exc:
        raise OutputDirError(
            f"{flag} {path}: cannot write in {parent} ({exc.strerror or exc})"
        ) from None
    os.close(fd)
    os.unlink(probe)
