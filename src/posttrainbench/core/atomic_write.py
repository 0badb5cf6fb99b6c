"""Replace a file whole: a temp file beside it, then one rename (a reader never sees half).

The one home of atomic file writing, on the host and inside tasks (it is part of both
payloads), so a crash or a full disk never leaves half a record, verdict or data file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes, mode: int = 0o644) -> Path:
    """Write *data* to *path* atomically; on any failure the old file is untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: Path, text: str, mode: int = 0o644) -> Path:
    """Write *text* (UTF-8) to *path* atomically; on any failure the old file is untouched."""
    return write_bytes_atomic(path, text.encode("utf-8"), mode)
