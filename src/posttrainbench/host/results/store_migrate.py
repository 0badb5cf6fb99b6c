"""Migrating a results store of an older format into the database, on its first open.

Before the database (store version 3) a store was `store.json`, `journal.jsonl` (one line
per stored run, the last of a run id winning: the trial it came from, its fingerprint,
and its record's blob in a pack, or the stat of its run dir's record.json), `packs/*.pack`
(records and copied files, each a blob named by pack, offset, length and CRC-32 in the
journal or in its record's `packed_files`), `runs/<id>/` (a run stored with its
final_model, or by an exporter before packs) and maybe `index.json` (before the journal).

`migrate` reads all of it and writes the database under a temporary name, renamed into
place once complete (`store_db.create`); only then are `store.json`, `journal.jsonl`,
`index.json` and `packs/` moved into `legacy/` (`finish_migration`, which an interrupted
migration's next open completes). Nothing is deleted: `legacy/` can be removed by hand
once the migrated store looks right. A packed run's files become `files` rows; a run dir
stays where it is and its files are read there, as before. A run that cannot be read
(a damaged blob, an invalid record) is listed in the `unreadable` table, which every
load reports as the old store did.
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.core.nofollow import open_regular
from posttrainbench.host.results import store_db
from posttrainbench.host.results.record import RECORD_FILE, ResultRecord
from posttrainbench.host.results.store_db import StoredRun

LEGACY_MARKER = "store.json"  # an older store's manifest
LEGACY_DIR = "legacy"
_LEGACY_NAMES = (LEGACY_MARKER, "journal.jsonl", "index.json", "packs")
_JOURNAL = "journal.jsonl"


class _JournalLine(BaseModel):
    """A line of an older store's journal (only the fields a migration needs)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    record: tuple[str, int, int, int] | None = None  # (pack, offset, length, CRC-32)


class _Packs:
    """Reads blobs of an older store's packs (each pack opened once)."""

    def __init__(self, packs_dir: Path):
        self.packs_dir = packs_dir
        self._fds: dict[str, int] = {}

    def read(self, ref: Any) -> bytes:
        """The blob *ref* names; OSError when its pack is missing, short, or it is damaged."""
        pack, offset, length, crc = ref
        if "/" in pack or pack.startswith("."):  # a damaged journal never reaches outside
            raise OSError(f"not a pack name: {pack!r}")
        fd = self._fds.get(pack)
        if fd is None:
            fd = self._fds[pack] = open_regular(self.packs_dir / pack)[0]
        data = os.pread(fd, length, offset)
        if len(data) != length or zlib.crc32(data) != crc:
            raise OSError(f"pack {pack}: the blob at {offset} is short or damaged")
        return data

    def close(self) -> None:
        """Close every pack opened."""
        for fd in self._fds.values():
            os.close(fd)


def _journal(root: Path) -> dict[str, _JournalLine]:
    """The last readable line of each run id (a torn or damaged line is skipped)."""
    try:
        lines = (root / _JOURNAL).read_bytes().splitlines()
    except FileNotFoundError:
        return {}
    found: dict[str, _JournalLine] = {}
    for line in lines:
        try:
            entry = _JournalLine.model_validate_json(line)
        except ValidationError:
            continue
        found[entry.run_id] = entry
    return found


def _record(data: bytes | str) -> tuple[ResultRecord, dict[str, Any]]:
    """A stored record, and the blob refs of its packed files (a field stores before the
    database had; the record no longer carries it)."""
    raw = json.loads(data)
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    refs = raw.pop("packed_files", None) or {}
    return ResultRecord.model_validate(raw), refs


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"cannot read ({exc.strerror or exc})"
    first = str(exc).splitlines()
    return f"not a valid run record ({' '.join(first[:3])})"


def read_legacy(root: Path) -> tuple[list[StoredRun], list[tuple[str, str]], list[str]]:
    """An older store's runs as rows, (where, why) of each that cannot be read, and the run
    dirs a packed run replaced (a crash before the old exporter removed them)."""
    journal = _journal(root)
    runs: list[StoredRun] = []
    unreadable: list[tuple[str, str]] = []
    packs = _Packs(root / "packs")
    try:
        for run_id, entry in sorted(journal.items()):
            if entry.record is None:
                continue  # a run dir: read below
            try:
                record, refs = _record(packs.read(entry.record))
                files = {}
                for name, ref in refs.items():
                    try:
                        files[name] = packs.read(ref)
                    except OSError:
                        continue  # a damaged file: its readers say they cannot read it
                runs.append(store_db.stored_run(record, files))
            except (OSError, ValueError) as exc:
                # Named where its bytes are kept once migrated.
                unreadable.append((f"{root / LEGACY_DIR / _JOURNAL} ({run_id})", _why(exc)))
    finally:
        packs.close()
    packed = {run.run_id for run in runs} | {
        run_id for run_id, e in journal.items() if e.record is not None
    }
    stale: list[str] = []
    runs_dir = root / "runs"
    for run_dir in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        if run_dir.is_symlink() or not run_dir.is_dir():
            continue
        if run_dir.name in packed:
            stale.append(run_dir.name)
            continue
        try:
            record, _ = _record((run_dir / RECORD_FILE).read_bytes())
            runs.append(store_db.stored_run(record, {}))  # its files stay in the run dir
        except (OSError, ValueError) as exc:
            unreadable.append((str(run_dir), _why(exc)))
    return runs, unreadable, stale


def migrate(root: Path, db_path: Path) -> None:
    """Write the database of the older store at *root*, then move its files into
    `legacy/` (callers hold the store's lock)."""
    runs, unreadable, stale = read_legacy(root)

    def fill(conn: sqlite3.Connection) -> None:
        store_db.insert_runs(conn, runs)
        conn.executemany("INSERT OR REPLACE INTO unreadable VALUES (?, ?)", unreadable)
        conn.execute("INSERT INTO meta VALUES ('migrated_from', ?)", (_old_version(root),))

    store_db.create(db_path, fill)
    finish_migration(root, stale)


def _old_version(root: Path) -> str:
    try:
        return str(json.loads((root / LEGACY_MARKER).read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


def finish_migration(root: Path, stale: Iterable[str] = ()) -> None:
    """Move an older store's files (and *stale* run dirs) into `legacy/` once the database
    exists; nothing when there are none. Never overwrites anything in `legacy/`."""
    if not (root / store_db.DB_FILE).exists():
        return
    moves = [(root / n, root / LEGACY_DIR / n) for n in _LEGACY_NAMES]
    moves += [(root / "runs" / r, root / LEGACY_DIR / "runs" / r) for r in stale]
    for source, target in moves:
        if os.path.lexists(source) and not os.path.lexists(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
