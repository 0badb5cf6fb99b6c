"""An output directory built beside its final place and renamed into it at the end, so
an interrupted or failed build never leaves a half-written one (nor loses the old one)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from posttrainbench.core.errors import OutputDirError


@contextmanager
def staged_output(out_dir: Path, name: str) -> Iterator[Path]:
    """Yield a staging dir for `out_dir/name`; when the block succeeds it replaces
    `out_dir/name`, when it fails it is removed and the old one stays."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir))
    except OSError as exc:
        raise OutputDirError(f"cannot write to output directory {out_dir}: {exc.strerror}") from exc
    try:
        yield staging
        staging.chmod(0o755)  # mkdtemp made it 0700
        final = out_dir / name
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
