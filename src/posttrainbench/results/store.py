"""The results store on disk: `RESULTS_DIR/runs/<trial id>/record.json` plus copied files.

Every run directory appears by one rename of a fully written staging directory, so a
reader (or an export that was killed) never sees half a run. Replacing a run moves the
old directory aside first and restores it if the swap did not finish.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.atomic_write import write_text_atomic
from posttrainbench.errors import PtbError
from posttrainbench.results.record import RECORD_FILE, ResultRecord

STORE_FILE = "store.json"
STORE_FORMAT = "posttrainbench-results"


class StoreError(PtbError):
    """The results directory cannot be used as a results store."""


class StoreManifest(BaseModel):
    """`store.json`: marks a directory as a results store."""

    model_config = ConfigDict(extra="forbid")

    format: str = STORE_FORMAT
    version: int = 1


class ResultsStore:
    """A results directory: runs, staging and a lock, all inside one root."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.runs = self.root / "runs"
        self.staging = self.root / ".staging"
        self.attic = self.root / ".replaced"

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

    def fingerprints(self) -> dict[str, str]:
        """run id -> fingerprint of every stored run (read without full validation)."""
        found: dict[str, str] = {}
        for run_dir in self._run_dirs():
            try:
                raw = json.loads((run_dir / RECORD_FILE).read_text(encoding="utf-8"))
                found[run_dir.name] = str(raw["fingerprint"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable: exported again
        return found

    def load(self) -> tuple[list[ResultRecord], list[str]]:
        """Every readable record, and one line per run that could not be read."""
        records: list[ResultRecord] = []
        skipped: list[str] = []
        for run_dir in self._run_dirs():
            path = run_dir / RECORD_FILE
            try:
                records.append(ResultRecord.model_validate_json(path.read_bytes()))
            except OSError as exc:
                skipped.append(f"{path}: cannot read ({exc.strerror or exc})")
            except ValidationError as exc:
                first = str(exc).splitlines()
                skipped.append(f"{path}: not a valid run record ({' '.join(first[:3])})")
        return records, skipped

    def _run_dirs(self) -> list[Path]:
        if not self.runs.is_dir():
            return []
        return sorted(p for p in self.runs.iterdir() if p.is_dir())
