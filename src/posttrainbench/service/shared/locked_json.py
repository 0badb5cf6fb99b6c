"""A JSON state file changed only under an exclusive ``fcntl`` lock and replaced atomically.

The lock is a sibling ``<name>.lock`` file locked with ``flock``: every ``open`` gets its
own lock, so it serialises threads of one process as well as separate processes.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from posttrainbench.core.atomic_write import write_text_atomic

M = TypeVar("M", bound=BaseModel)


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of *path* for the duration of the block."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def read_model(path: Path, model: type[M]) -> M:
    """The model stored at *path*, or a fresh default one when there is no file yet."""
    if not path.exists():
        return model()
    return model.model_validate_json(path.read_text(encoding="utf-8"))


def write_model(path: Path, value: BaseModel) -> None:
    """Replace *path* with *value* in one rename (mode 0600: state is for the service only)."""
    write_text_atomic(path, value.model_dump_json(indent=2) + "\n", mode=0o600)
