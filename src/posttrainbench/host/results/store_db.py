"""The results store's SQLite database: its schema, connections, and a record's rows.

One file, `RESULTS_DIR/results.sqlite`, in WAL mode (readers never wait for an export,
an export never waits for readers), written with the standard library's `sqlite3`.
docs/results-store.md describes the tables for whoever queries them.

Tables:

- `runs`: one row per stored run, its main fields as plain columns (what a researcher
  filters and groups by) and the whole `ResultRecord` as JSON in `record`, the column the
  store reads back and validates, so nothing is lost to the column choice;
- `verdicts`: one row per judge verdict of a run;
- `files`: the run's copied files (traces, agent log, samples, code snapshot) as blobs.
  Blobs, not files: a run's files are small (capped by `copy_caps`) and are written in
  the same transaction as its row, so a killed export never leaves a run with half its
  files; a file per trace would also cost the directory and file creations (~0.2-0.3 ms
  each here) that made exports slow before. A run stored with its final_model keeps
  everything in its run directory `runs/<id>/` instead (a model is gigabytes a re-score
  reads in place) and has no `files` rows;
- `unreadable`: runs of an older store that could not be read when it was migrated
  (`store_migrate`), reported by every load as before;
- `meta`: the format and version.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from posttrainbench.core.errors import PtbError
from posttrainbench.host.results.record import ResultRecord

DB_FILE = "results.sqlite"
STORE_FORMAT = "posttrainbench-results"
STORE_VERSION = "3"  # 1: run dirs, 2: packs and a journal (both migrated on open), 3: SQLite
_SIDE_FILES = ("-wal", "-shm")  # SQLite's files beside a WAL database
_CHECKPOINT_PAGES = 65_536  # 256 MB of 4 KB pages
BUSY_SECONDS = 30.0  # a reader waits this long for a checkpoint or a migration, at most

SCHEMA_FILE = Path(__file__).with_name("schema.sql")
_INSERT_RUN = f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * 27)})"  # run_row's 27


class StoreError(PtbError):
    """The results directory cannot be used as a results store."""


class StoredRun(NamedTuple):
    """One run ready to commit: plain rows built where the trial was read (a worker), so
    the writing process only inserts them.

    *files*: (name, data) of each blob; *staged*: its run directory when it is stored with
    one (its files are in there instead).
    """

    run_id: str
    row: tuple
    verdicts: list[tuple]
    files: list[tuple[str, bytes]]
    staged: str | None = None


def run_row(record: ResultRecord) -> tuple:
    """The `runs` row of *record* (its JSON included)."""
    time, usage = record.time, record.usage
    return (
        record.id,
        record.benchmark,
        record.base_model,
        record.agent,
        record.agent_model,
        record.agent_label,
        record.job_name,
        record.trial_name,
        record.task_name,
        record.task_version,
        record.rescore_of,
        record.status,
        record.error,
        record.score,
        record.reward,
        record.flagged,
        record.hours,
        time.agent_hours,
        usage.cost_usd,
        usage.gpu_hours,
        time.started_at.isoformat() if time.started_at else None,
        time.finished_at.isoformat() if time.finished_at else None,
        record.exported_at.isoformat(),
        record.final_model_dir,
        record.source_dir,
        record.fingerprint,
        record.model_dump_json(),
    )


def stored_run(
    record: ResultRecord, files: dict[str, bytes], staged: str | None = None
) -> StoredRun:
    """*record* and its blobs as the rows that store them."""
    verdicts = [
        (record.id, v.judge, v.flagged, v.decided_by, v.justification) for v in record.verdicts
    ]
    return StoredRun(record.id, run_row(record), verdicts, list(files.items()), staged)


def insert_runs(conn: sqlite3.Connection, runs: list[StoredRun]) -> None:
    """Write *runs*' rows, replacing what is stored under their ids (inside the caller's
    transaction)."""
    ids = [(run.run_id,) for run in runs]
    conn.executemany("DELETE FROM verdicts WHERE run_id = ?", ids)
    conn.executemany("DELETE FROM files WHERE run_id = ?", ids)
    conn.executemany(_INSERT_RUN, [run.row for run in runs])
    conn.executemany(
        "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?)",
        [verdict for run in runs for verdict in run.verdicts],
    )
    conn.executemany(
        "INSERT INTO files VALUES (?, ?, ?, ?)",
        [(run.run_id, name, len(data), data) for run in runs for name, data in run.files],
    )


def connect(path: Path) -> sqlite3.Connection:
    """A connection to an existing store database, checked to be one (StoreError if not).

    Autocommit mode: writers open their transactions explicitly (`BEGIN IMMEDIATE`).
    """
    try:
        # mode=rw: opening never creates a database where there is none.
        uri = Path(path).resolve().as_uri() + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open results database {path}: {exc}") from None
    try:
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never torn
        # Checkpoints (copying the WAL into the database) every 1,000 pages, the default,
        # cost 2,000 runs' commits ~0.85 s here, against ~0.4 s plus ~0.3 s at close with
        # this; the last connection to close checkpoints and removes the WAL file anyway.
        conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
        found = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"{path} is not a PostTrainBench results database ({exc})") from None
    if found.get("format") != STORE_FORMAT:
        conn.close()
        raise StoreError(f"{path} is not a PostTrainBench results database (no format mark)")
    if found.get("version") != STORE_VERSION:
        conn.close()
        raise StoreError(
            f"{path} is a results database of version {found.get('version')}; this ptb reads "
            f"version {STORE_VERSION}"
        )
    return conn


def create(path: Path, fill: Callable[[sqlite3.Connection], None] | None = None) -> None:
    """Make a new store database at *path* (replacing nothing there but a leftover of an
    interrupted create): built under a temporary name, with *fill*'s rows, and renamed into
    place once complete, so *path* is never a half-made database."""
    building = path.with_name(path.name + ".new")
    for leftover in (building, *(building.with_name(building.name + s) for s in _SIDE_FILES)):
        leftover.unlink(missing_ok=True)
    conn = sqlite3.connect(building, isolation_level=None)
    try:
        with transaction(conn):  # one transaction: one sync, not one per table
            for statement in SCHEMA_FILE.read_text().split(";"):
                conn.execute(statement)
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("format", STORE_FORMAT), ("version", STORE_VERSION)],
            )
            if fill is not None:
                fill(conn)
        # Only now: built with a rollback journal, nothing of it is in a -wal file the
        # rename below would leave behind. WAL is a property of the file from here on.
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    os.replace(building, path)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed when the block ends, rolled back when it raises
    (a Ctrl-C included). IMMEDIATE: it takes the write lock at once, so a second writer
    waits here, not half-way through."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
