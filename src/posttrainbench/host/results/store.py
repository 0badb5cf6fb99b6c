"""The results store on disk: one SQLite database, and run dirs for runs with a model.

```
RESULTS_DIR/
  results.sqlite   runs, verdicts and copied files (store_db; docs/results-store.md)
  runs/<id>/       record.json and files of a run stored with its final_model
  legacy/          an older store's journal, packs and manifest, once migrated
```

A run appears by the commit of the transaction that writes its rows, one per chunk of
runs: a killed export never leaves half a run visible. A run dir appears by one rename
of a fully written staging directory before that commit (replacing a run dir moves the
old one aside first, restored if the swap did not finish); a run dir whose transaction
never committed is replaced when its trial is exported again. Writers hold the store's
lock (one export at a time, a second one stops with a clear error); readers need none.
A store of an older format is migrated when first opened (`store_migrate`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.host.results import store_db
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.store_db import DB_FILE, StoredRun, StoreError
from posttrainbench.host.results.store_migrate import LEGACY_MARKER, finish_migration, migrate

__all__ = ["ResultsStore", "StoreError", "StoredPrint"]

_SUBSTR_MAX = 2**31 - 1  # SQLite's substr() reads its length as a 32-bit int


class StoredPrint(NamedTuple):
    """What an export knows of a stored run without reading it: where it came from, and
    that trial's fingerprint then."""

    run_id: str
    source_dir: str
    fingerprint: str


class ResultsStore:
    """A results directory: its database, run dirs, staging and a lock, all inside one root."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.db_path = self.root / DB_FILE
        self.runs = self.root / "runs"
        self.staging = self.root / ".staging"
        self.attic = self.root / ".replaced"
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def open(cls, root: Path, *, create: bool) -> ResultsStore:
        """Open a store (migrating an older one); with *create*, make one in a new or empty
        directory. A foreign or damaged database is a StoreError, and is left as it is."""
        store = cls(root)
        if not store.db_path.exists() and (store.root / LEGACY_MARKER).is_file():
            with store.locked():  # migrates it (see `locked`)
                pass
        if store.db_path.exists():
            store.connection  # noqa: B018 (checks the database now: one clear error)
            return store
        if not create:
            raise StoreError(
                f"{root} is not a results store (no {DB_FILE}); create one with "
                "`ptb results export`"
            )
        if store.root.exists() and (not store.root.is_dir() or any(store.root.iterdir())):
            raise StoreError(
                f"{root} exists and is not an empty directory or a results store; "
                "choose another --to"
            )
        try:
            store.runs.mkdir(parents=True, exist_ok=True)
            store_db.create(store.db_path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot create results store {root}: {exc}") from None
        return store

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's database connection, opened (and checked) on first use."""
        if self._conn is None:
            if not self.db_path.is_file():
                raise StoreError(f"{self.root} is not a results store (no {DB_FILE})")
            self._conn = store_db.connect(self.db_path)
        return self._conn

    def close(self) -> None:
        """Close the database connection (reopened when used again)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's writer lock; a second concurrent export stops with a clear error.
        An older store is migrated first, and what an interrupted writer left is undone."""
        handle = open(self.root / ".lock", "w")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError(
                    f"another export is writing to {self.root}; wait for it to finish"
                ) from None
            if not self.db_path.exists() and (self.root / LEGACY_MARKER).is_file():
                migrate(self.root, self.db_path)
            finish_migration(self.root)
            self.recover()
            yield
        finally:
            handle.close()

    def recover(self) -> None:
        """Undo what an interrupted writer left: restore swapped-out runs, drop staging."""
        if self.attic.is_dir():
            for old in self.attic.iterdir():
                target = self.runs / old.name
                if target.exists():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(old, target)
        shutil.rmtree(self.staging, ignore_errors=True)

    def place_run_dir(self, staged: Path, run_id: str) -> Path:
        """Move a fully written staging directory into place (replacing an older export)."""
        target = self.runs / run_id
        if target.exists():
            self.attic.mkdir(exist_ok=True)
            aside = self.attic / run_id
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(target, aside)
            os.replace(staged, target)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(staged, target)
        return target

    def commit(self, runs: list[StoredRun]) -> None:
        """Store *runs* (each replacing the stored run of its id) in one transaction, their
        run dirs moved into place first; a run dir a run without one replaces is removed
        after the commit (a crash in between leaves it unread, never a store without the
        run). Callers hold the lock."""
        for run in runs:
            if run.staged is not None:
                self.place_run_dir(Path(run.staged), run.run_id)
        with store_db.transaction(self.connection) as conn:
            store_db.insert_runs(conn, runs)
        runs_dir = str(self.runs)  # string joins: a Path costs more than the stat, per run
        for run in runs:
            if run.staged is None and os.path.lexists(os.path.join(runs_dir, run.run_id)):
                shutil.rmtree(os.path.join(runs_dir, run.run_id), ignore_errors=True)

    def prints(self) -> list[StoredPrint]:
        """The source dir and fingerprint of every stored run (no record is read)."""
        rows = self.connection.execute("SELECT run_id, source_dir, fingerprint FROM runs")
        return [StoredPrint(*row) for row in rows]

    def load(self) -> tuple[list[ResultRecord], list[str]]:
        """Every readable record, by run id, and one line per run that could not be read."""
        records: list[ResultRecord] = []
        skipped: list[str] = []
        conn = self.connection
        for run_id, text in conn.execute("SELECT run_id, record FROM runs ORDER BY run_id"):
            try:
                records.append(ResultRecord.model_validate_json(text))
            except ValidationError as exc:
                first = str(exc).splitlines()
                skipped.append(
                    f"{self.db_path} ({run_id}): not a valid run record ({' '.join(first[:3])})"
                )
        rows = conn.execute("SELECT source, reason FROM unreadable ORDER BY source")
        skipped += [f"{source}: {reason}" for source, reason in rows]
        return records, skipped

    def record(self, run_id: str) -> ResultRecord | None:
        """One run's record, read alone (None when the store has no such run)."""
        row = self.connection.execute(
            "SELECT record FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return ResultRecord.model_validate_json(row[0]) if row else None

    def read_run_file(self, record: ResultRecord, relative: str, limit: int) -> tuple[bytes, bool]:
        """The first *limit* bytes of a stored run's file, and whether there was more.

        A run stored with a run dir has its files there: read below the run dir without
        following any link (a hard link there is the user's backup, not the agent's).
        """
        row = self.connection.execute(
            "SELECT substr(data, 1, ?), size FROM files WHERE run_id = ? AND name = ?",
            (min(limit, _SUBSTR_MAX), record.id, relative),
        ).fetchone()
        if row is not None:
            return bytes(row[0]), row[1] > limit
        with SafeDir.open(self.runs / record.id, hard_links_ok=True) as root:
            return root.read_head(relative, limit)
