"""Prepared benchmark data on disk: ``<data dir>/<benchmark>/<split>.jsonl``.

Every benchmark's data, whatever its public source, is normalised once (by
``ptb data prepare`` or the task compiler) into one JSON line per :class:`Sample`:
``{"id": ..., "category": ..., "data": {...}}``. Sandboxes read it from
``$PTB_DATA_DIR``: the agent's copy (``/opt/ptb/data``) holds only the split its
feedback mode allows; the verifier's sealed copy (``/tests/data``) holds the test set.
Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from posttrainbench.core.atomic_write import write_bytes_atomic
from posttrainbench.core.model_task_layout import MODEL_LAYOUT

from .base import Sample

DATA_DIR_ENV = "PTB_DATA_DIR"


class DataMissingError(FileNotFoundError):
    """The prepared data for a benchmark split is not there."""


def data_dir() -> Path:
    """The prepared-data root: ``$PTB_DATA_DIR``, else the task's ``$PTB_ROOT/data``."""
    root = os.environ.get(DATA_DIR_ENV)
    if root:
        return Path(root)
    task_data = Path(os.environ.get("PTB_ROOT", MODEL_LAYOUT.root)) / "data"
    if task_data.is_dir():
        return task_data
    raise DataMissingError(f"no benchmark data: set {DATA_DIR_ENV} (see `ptb data prepare`)")


def split_path(benchmark_id: str, split: str, root: Path | None = None) -> Path:
    """Path of one prepared split file."""
    return (root or data_dir()) / benchmark_id / f"{split}.jsonl"


def sample_to_json(sample: Sample) -> str:
    """One JSON line (sorted keys, so the bytes and hence the hash are stable)."""
    return json.dumps(
        {"id": sample.id, "category": sample.category, "data": sample.data},
        sort_keys=True,
        ensure_ascii=False,
    )


def sample_from_json(line: str) -> Sample:
    row = json.loads(line)
    return Sample(
        id=str(row["id"]), category=str(row.get("category", "")), data=row.get("data", {})
    )


def read_split(benchmark_id: str, split: str, root: Path | None = None) -> list[Sample]:
    """All samples of a prepared split, in file order."""
    path = split_path(benchmark_id, split, root)
    if not path.is_file():
        raise DataMissingError(f"no {split!r} data for {benchmark_id!r} at {path}")
    with path.open(encoding="utf-8") as fh:
        return [sample_from_json(line) for line in fh if line.strip()]


def write_split(path: Path, samples: Iterable[Sample]) -> str:
    """Write samples as JSONL atomically; return the file's sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(sample_to_json(s) + "\n" for s in samples).encode("utf-8")
    write_bytes_atomic(path, body)
    return hashlib.sha256(body).hexdigest()
