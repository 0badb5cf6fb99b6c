"""Unpacked text written to a directory, one file per piece, for the checker to read."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from posttrainbench.task.integrity.contamination.unpack import Piece, UnpackBudget, unpack_file

SUFFIXES = {
    "jsonl": ".jsonl",
    "json": ".json",
    "csv": ".csv",
    "txt": ".txt",
    "parquet": ".parquet",
    "arrow": ".arrow",
}


class TextStager:
    """Writes pieces as numbered files (``0000000.jsonl``...) within a cap on their bytes.

    ``written`` keeps (file name, origin, format) of each in order. Going over the cap
    stops the budget (``budget.hit``), so the caller sees the staging cut short.
    """

    def __init__(self, directory: Path, budget: UnpackBudget, max_bytes: int):
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.budget = budget
        self.max_bytes = max_bytes
        self.bytes = 0
        self.written: list[tuple[str, str, str]] = []

    def add(self, piece: Piece) -> bool:
        """Write one piece; False (and the cap recorded) when it would pass the cap."""
        if self.bytes + len(piece.data) > self.max_bytes:
            self.budget.hit = self.budget.hit or (
                "bytes",
                f"the staged text would pass {self.max_bytes} bytes at {piece.origin}",
            )
            return False
        name = f"{len(self.written):07d}{SUFFIXES[piece.fmt]}"
        (self.directory / name).write_bytes(piece.data)
        self.written.append((name, piece.origin, piece.fmt))
        self.bytes += len(piece.data)
        return True

    def add_file(self, handle: BinaryIO, size: int, origin: str) -> str | None:
        """Unpack one open file into pieces; a note when it was not staged whole."""
        try:
            for piece in unpack_file(handle, size, origin, self.budget):
                if not self.add(piece):
                    break
        except Exception as exc:
            self.budget.not_read(f"{origin}: unpacking failed ({type(exc).__name__}: {exc})")
            return f"unpacking failed: {type(exc).__name__}"
        return "cut short by a cap" if self.budget.hit is not None else None
