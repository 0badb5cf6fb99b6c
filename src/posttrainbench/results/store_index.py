"""`RESULTS_DIR/index.json`: what the store holds, so a re-export need not re-read every record.

One entry per stored run: the trial directory it came from, that trial's fingerprint at
export time, and the stat of the run's `record.json` (inode, size, mtime). The index is
a cache, never the truth: on load every entry is checked against its `record.json` with
one stat, runs missing from the index are found by listing `runs/`, and any entry that
does not match (a run replaced by hand or by an older exporter, an export killed before
it saved the index, a corrupted or missing file) is re-read from its record. The file is
written atomically under the store's writer lock, once per export.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.atomic_write import write_text_atomic
from posttrainbench.results.record import RECORD_FILE

INDEX_FILE = "index.json"
INDEX_FORMAT: Literal["posttrainbench-results-index"] = "posttrainbench-results-index"


class IndexEntry(BaseModel):
    """One stored run, as the exporter last wrote it."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    source_dir: str
    fingerprint: str
    record_stat: tuple[int, int, int]  # (inode, size, mtime_ns) of its record.json


class StoreIndex(BaseModel):
    """The whole index file."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["posttrainbench-results-index"] = INDEX_FORMAT
    version: Literal[1] = 1
    runs: list[IndexEntry]


def _record_stat(path: Path | str) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def entry_for(runs_dir: Path, run_id: str, source_dir: str, fingerprint: str) -> IndexEntry | None:
    """The entry of a run just committed (None when its record.json cannot be stat'ed)."""
    found = _record_stat(runs_dir / run_id / RECORD_FILE)
    if found is None:
        return None
    return IndexEntry(
        run_id=run_id, source_dir=source_dir, fingerprint=fingerprint, record_stat=found
    )


def _from_record(runs_dir: Path, run_id: str) -> IndexEntry | None:
    """Re-read one run's record for its source dir and fingerprint (no full validation:
    `load` validates records; here an unreadable one is simply exported again)."""
    path = runs_dir / run_id / RECORD_FILE
    before = _record_stat(path)
    try:
        raw = json.loads(path.read_bytes())
        source, printed = str(raw["source_dir"]), str(raw["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if before is None or _record_stat(path) != before:
        return None  # changed while read: leave it to the next export
    return IndexEntry(run_id=run_id, source_dir=source, fingerprint=printed, record_stat=before)


def load_index(root: Path, runs_dir: Path) -> tuple[dict[str, IndexEntry], int]:
    """Verified entries by run id, and how many were re-read from their records.

    An entry counts only when its record.json still has the stat the index holds; every
    other run in `runs/` is re-read, so a stale, corrupted or missing index costs time,
    never a wrong answer.
    """
    try:
        saved = StoreIndex.model_validate_json((root / INDEX_FILE).read_bytes()).runs
    except (OSError, ValueError, ValidationError):
        saved = []  # missing or corrupted: every run is re-read below
    by_id = {e.run_id: e for e in saved}
    try:
        with os.scandir(runs_dir) as listing:
            run_ids = sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return {}, 0
    verified: dict[str, IndexEntry] = {}
    reread = 0
    runs = str(runs_dir)  # string joins: pathlib costs ~15 us a run here, on every export
    for run_id in run_ids:
        entry = by_id.get(run_id)
        if entry is not None and _record_stat(os.path.join(runs, run_id, RECORD_FILE)) == tuple(
            entry.record_stat
        ):
            verified[run_id] = entry
            continue
        reread += 1
        fresh = _from_record(runs_dir, run_id)
        if fresh is not None:
            verified[run_id] = fresh
    return verified, reread


def save_index(root: Path, entries: dict[str, IndexEntry]) -> None:
    """Write the index atomically (callers hold the store's writer lock)."""
    index = StoreIndex(runs=[entries[k] for k in sorted(entries)])
    write_text_atomic(root / INDEX_FILE, index.model_dump_json() + "\n")
