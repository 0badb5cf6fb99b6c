"""The results store on disk: a journal of stored runs, packs of their blobs, run dirs.

```
RESULTS_DIR/
  store.json       marks the directory as a results store
  journal.jsonl    one line per run stored, in order (the last line of a run id wins)
  packs/*.pack     records and their copied files, appended (pack.py)
  runs/<id>/       record.json and files of a run stored with its final_model, or by an
                   older exporter
```

A run appears by one journal line, written after everything it refers to: its blobs,
or its run directory, which appears by one rename of a fully written staging directory
(replacing a run dir moves the old one aside first, restored if the swap did not
finish). A reader or an export that was killed never sees half a run; a torn last
journal line is ignored. A run dir whose run id's last line says packed is a leftover
of a replacement and is not read.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import PtbError
from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.host.results.pack import PACKS_DIR, PackReader
from posttrainbench.host.results.record import RECORD_FILE, ResultRecord
from posttrainbench.host.results.store_index import JOURNAL_FILE, read_journal, run_dir_ids

STORE_FILE = "store.json"
STORE_FORMAT = "posttrainbench-results"


class StoreError(PtbError):
    """The results directory cannot be used as a results store."""


class StoreManifest(BaseModel):
    """`store.json`: marks a directory as a results store."""

    model_config = ConfigDict(extra="forbid")

    format: str = STORE_FORMAT
    version: int = 2  # 2: runs in packs and a journal; a version-1 store (run dirs) reads as one


class ResultsStore:
    """A results directory: runs, staging and a lock, all inside one root."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.runs = self.root / "runs"
        self.staging = self.root / ".staging"
        self.attic = self.root / ".replaced"
        self.packs = self.root / PACKS_DIR

    @classmethod
    def open(cls, root: Path, *, create: bool) -> ResultsStore:
        """Open a store; with *create*, make one in a new or empty directory."""
        store = cls(root)
        manifest = store.root / STORE_FILE
        if manifest.is_file():
            try:
                found = StoreManifest.model_validate_json(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError, ValidationError):
                raise StoreError(f"{manifest} is not a valid results-store manifest") from None
            if found.format != STORE_FORMAT:
                raise StoreError(f"{root} is not a PostTrainBench results store ({manifest})")
            return store
        if not create:
            raise StoreError(
                f"{root} is not a results store (no {STORE_FILE}); create one with `ptb results export`"
            )
        if store.root.exists() and (not store.root.is_dir() or any(store.root.iterdir())):
            raise StoreError(
                f"{root} exists and is not an empty directory or a results store; "
                "choose another --to"
            )
        try:
            store.runs.mkdir(parents=True, exist_ok=True)
            store.packs.mkdir(exist_ok=True)
            write_text_atomic(manifest, StoreManifest().model_dump_json(indent=2) + "\n")
        except OSError as exc:
            raise StoreError(f"cannot create results store {root}: {exc.strerror or exc}") from None
        return store

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's writer lock; a second concurrent export stops with a clear error."""
        handle = open(self.root / ".lock", "w")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError(
                    f"another export is writing to {self.root}; wait for it to finish"
                ) from None
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

    def commit(self, staged: Path, run_id: str) -> Path:
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

    def load(self) -> tuple[list[ResultRecord], list[str]]:
        """Every readable record, by run id, and one line per run that could not be read."""
        journal, _ = read_journal(self.root)
        packed = {k: e.record for k, e in journal.items() if e.record is not None}
        records: list[ResultRecord] = []
        skipped: list[str] = []
        with PackReader(self.packs) as packs:
            for run_id in sorted(packed.keys() | set(run_dir_ids(self.runs))):
                ref = packed.get(run_id)
                where = f"{self.root / JOURNAL_FILE} ({run_id})" if ref else self.runs / run_id
                try:
                    data = (
                        packs.read(ref) if ref else (self.runs / run_id / RECORD_FILE).read_bytes()
                    )
                    records.append(ResultRecord.model_validate_json(data))
                except OSError as exc:
                    skipped.append(f"{where}: cannot read ({exc.strerror or exc})")
                except ValidationError as exc:
                    first = str(exc).splitlines()
                    skipped.append(f"{where}: not a valid run record ({' '.join(first[:3])})")
        return records, skipped

    def record(self, run_id: str) -> ResultRecord | None:
        """One run's record, read alone (None when the store has no such run)."""
        entry = read_journal(self.root)[0].get(run_id)
        if entry is not None and entry.record is not None:
            with PackReader(self.packs) as packs:
                return ResultRecord.model_validate_json(packs.read(entry.record))
        path = self.runs / run_id / RECORD_FILE
        return ResultRecord.model_validate_json(path.read_bytes()) if path.is_file() else None

    def read_run_file(
        self, record: ResultRecord, relative: str, limit: int, packs: PackReader | None = None
    ) -> tuple[bytes, bool]:
        """The first *limit* bytes of a stored run's file, and whether there was more.

        A run dir may hold links an older export copied: it is read below the run dir
        without following any (a hard link there is the user's backup, not the agent's).
        """
        if not record.packed_files:
            with SafeDir.open(self.runs / record.id, hard_links_ok=True) as root:
                return root.read_head(relative, limit)
        ref = record.packed_files.get(relative)
        if ref is None:
            raise FileNotFoundError(errno.ENOENT, "not in the run's packed files", relative)
        if packs is not None:
            data = packs.read(ref)
        else:
            with PackReader(self.packs) as own:
                data = own.read(ref)
        return data[:limit], len(data) > limit
