"""What a results store holds: its journal, and the checks that let an export trust it.

`journal.jsonl` has one `IndexEntry` line per run stored, appended by the exporter (the
store's only writer, under its lock) as each run is committed: the trial directory it
came from, that trial's fingerprint at export time, and where the run is: its record's
blob in a pack, or its run directory (with the stat of its `record.json`: inode, size,
mtime). The last line of a run id wins. A re-export compares fingerprints against it and
opens nothing of a trial that did not change.

The journal is the store's truth for packed runs; for run directories it is a cache:
on `load_index` every directory entry is checked against its `record.json` with one
stat, directories the journal does not name (an older exporter's store, whose
`index.json` is read once and then carried into the journal) are found by listing
`runs/`, and one that does not match is re-read from its record. A line that does not
parse (a torn last line after a crash) is skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.host.results.pack import PACKS_DIR, BlobRef
from posttrainbench.host.results.record import RECORD_FILE

JOURNAL_FILE = "journal.jsonl"
LEGACY_INDEX_FILE = "index.json"  # written by exporters before the journal; read only
LEGACY_INDEX_FORMAT: Literal["posttrainbench-results-index"] = "posttrainbench-results-index"
_OPEN_APPEND = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


class IndexEntry(BaseModel):
    """One stored run, as the exporter last wrote it: packed (*record*) or a run dir."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    source_dir: str
    fingerprint: str
    record: BlobRef | None = None  # a packed run: its record's blob
    record_stat: tuple[int, int, int] | None = None  # a run dir: its record.json's stat

    @model_validator(mode="after")
    def _one_place(self) -> IndexEntry:
        if (self.record is None) == (self.record_stat is None):
            raise ValueError("an entry names either a packed record or a run dir's record stat")
        return self


class _LegacyIndex(BaseModel):
    """`index.json` of an older exporter: run-dir entries only."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["posttrainbench-results-index"] = LEGACY_INDEX_FORMAT
    version: Literal[1] = 1
    runs: list[IndexEntry]


def read_journal(root: Path) -> tuple[dict[str, IndexEntry], int]:
    """The last journal entry of each run id (lines that do not parse are skipped), and
    how many lines the journal has."""
    try:
        lines = (root / JOURNAL_FILE).read_bytes().splitlines()
    except FileNotFoundError:
        return {}, 0
    found: dict[str, IndexEntry] = {}
    for line in lines:
        try:
            entry = IndexEntry.model_validate_json(line)
        except ValidationError:
            continue  # torn by a crash, or damaged: that run is exported again
        found[entry.run_id] = entry
    return found, len(lines)


def run_dir_ids(runs_dir: Path) -> list[str]:
    """The run directories under `runs/` (links and files are not runs)."""
    try:
        with os.scandir(runs_dir) as listing:
            return sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []


def record_stat(path: Path | str) -> tuple[int, int, int] | None:
    """(inode, size, mtime_ns) of a run dir's record.json; None when it cannot be stat'ed."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def _from_record(runs_dir: Path, run_id: str) -> IndexEntry | None:
    """Re-read one run dir's record for its source dir and fingerprint (no full validation:
    `load` validates records; here an unreadable one is simply exported again)."""
    path = runs_dir / run_id / RECORD_FILE
    before = record_stat(path)
    try:
        raw = json.loads(path.read_bytes())
        source, printed = str(raw["source_dir"]), str(raw["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if before is None or record_stat(path) != before:
        return None  # changed while read: leave it to the next export
    return IndexEntry(run_id=run_id, source_dir=source, fingerprint=printed, record_stat=before)


def _legacy_index(root: Path) -> dict[str, IndexEntry]:
    try:
        saved = _LegacyIndex.model_validate_json((root / LEGACY_INDEX_FILE).read_bytes()).runs
    except (OSError, ValueError, ValidationError):
        return {}
    return {e.run_id: e for e in saved}


class LoadedIndex(BaseModel):
    """What `load_index` found: the verified entries, and what the export must tidy."""

    entries: dict[str, IndexEntry]
    # Entries not (or no longer truly) in the journal: re-read or carried from index.json.
    to_journal: list[IndexEntry]
    run_dirs: set[str]  # the run directories under runs/ (stale ones included)
    stale_dirs: list[str]  # run dirs a packed entry replaced (a crash before their removal)
    reread: int
    journal_lines: int


def load_index(root: Path, runs_dir: Path) -> LoadedIndex:
    """The store's runs by id, each entry checked; a stale or damaged one costs a re-read
    (or a re-export), never a wrong answer."""
    journal, lines = read_journal(root)
    legacy: dict[str, IndexEntry] | None = None
    entries: dict[str, IndexEntry] = {}
    to_journal: list[IndexEntry] = []
    stale: list[str] = []
    reread = 0
    runs = str(runs_dir)  # string joins: pathlib costs ~15 us a run here, on every export
    dir_ids = run_dir_ids(runs_dir)
    pack_sizes: dict[str, int | None] = {}
    for run_id, last in journal.items():
        if last.record is not None and _pack_holds(root, last.record, pack_sizes):
            entries[run_id] = last
    for run_id in dir_ids:
        if run_id in entries:
            stale.append(run_id)
            continue
        entry: IndexEntry | None = journal.get(run_id)
        if entry is None or entry.record_stat is None:
            if legacy is None:
                legacy = _legacy_index(root)
            entry = legacy.get(run_id)
            fresh = True
        else:
            fresh = False
        stat_now = record_stat(os.path.join(runs, run_id, RECORD_FILE))
        if entry is None or entry.record_stat is None or stat_now != tuple(entry.record_stat):
            reread += 1
            entry = _from_record(runs_dir, run_id)
            fresh = True
        if entry is not None:
            entries[run_id] = entry
            if fresh:
                to_journal.append(entry)
    return LoadedIndex(
        entries=entries,
        to_journal=to_journal,
        run_dirs=set(dir_ids),
        stale_dirs=stale,
        reread=reread,
        journal_lines=lines,
    )


def _pack_holds(root: Path, ref: BlobRef, sizes: dict[str, int | None]) -> bool:
    """Whether the pack exists and reaches past the blob (one stat per pack in *sizes*)."""
    if ref.pack not in sizes:
        try:
            sizes[ref.pack] = os.stat(root / PACKS_DIR / ref.pack, follow_symlinks=False).st_size
        except OSError:
            sizes[ref.pack] = None
    size = sizes[ref.pack]
    return size is not None and ref.offset + ref.length <= size


class Journal:
    """The journal, open for appending one line per committed run (callers hold the lock)."""

    def __init__(self, root: Path):
        self.path = root / JOURNAL_FILE
        self._fd = os.open(self.path, _OPEN_APPEND, 0o644)
        self.lines_written = 0
        size = os.fstat(self._fd).st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            os.write(self._fd, b"\n")  # ends a line torn by a crash: the next one stays whole

    def append(self, entry: IndexEntry) -> None:
        """One line, written by one call: a crash leaves at most this line torn."""
        line = (entry.model_dump_json(exclude_none=True) + "\n").encode()
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]
        self.lines_written += 1

    def close(self) -> None:
        """Close the journal file."""
        os.close(self._fd)


def compact_journal(root: Path, entries: dict[str, IndexEntry]) -> None:
    """Rewrite the journal with only *entries* (one line a run), atomically."""
    lines = "".join(entries[k].model_dump_json(exclude_none=True) + "\n" for k in sorted(entries))
    write_text_atomic(root / JOURNAL_FILE, lines)
