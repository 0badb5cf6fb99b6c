"""Training-data inputs: which files are read, and how each file splits into records.

jsonl: one record per line. txt/md: one record per paragraph (blank-line separated).
json: one record per element of a top-level array (else the whole document).
csv, parquet and arrow (the Hugging Face datasets cache format): one record per row.
A record's text is all its string values.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.core.errors import PtbError

LINE_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "txt", ".md": "txt", ".text": "txt"}
ROW_FORMATS = {
    ".json": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".arrow": "arrow",
}
SUPPORTED = {**LINE_FORMATS, **ROW_FORMATS}


class InputError(PtbError):
    """A training-data input does not exist or has an unsupported type."""


def input_format(path: Path) -> str | None:
    """'jsonl', 'txt', 'json', 'csv', 'parquet', or None for other files."""
    return SUPPORTED.get(path.suffix.lower())


def expand_inputs(inputs: list[str | Path]) -> list[Path]:
    """Files to read: given files, plus supported files under given directories (sorted)."""
    files: list[Path] = []
    for raw in inputs:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                files.extend(Path(root) / n for n in sorted(names) if input_format(Path(n)))
        elif path.is_file():
            if not input_format(path):
                raise InputError(
                    f"{path}: unsupported file type (use {', '.join(sorted(SUPPORTED))})"
                )
            files.append(path)
        else:
            raise InputError(f"input not found: {path}")
    return files


@dataclass
class RecordBlock:
    """Records of one file (or one chunk of it) laid out in one byte buffer."""

    data: bytes
    starts: list[int]  # offset of each record in `data`
    ends: list[int]
    numbers: list[int]  # what the locator shows: line, row or byte number
    label: str  # 'line', 'row', 'item', 'document', 'paragraph at byte'
    is_json: bool  # records are JSON values (parse them for the text)
    newlines: int = 0  # newline bytes in `data`, counted for jsonl (to number lines)

    def record(self, i: int) -> bytes:
        """The raw bytes of record i."""
        return self.data[self.starts[i] : self.ends[i]]

    def locator(self, i: int) -> str:
        """Where record i is in its file, e.g. 'line 12'."""
        return f"{self.label} {self.numbers[i]}"


def line_records(data: bytes, fmt: str, first_line: int = 1, byte_offset: int = 0) -> RecordBlock:
    """Records of jsonl bytes (non-empty lines, numbered from `first_line`) or of txt
    bytes (paragraphs, located by their byte offset in the file: `byte_offset` + offset)."""
    if fmt == "jsonl":
        import numpy as np

        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A)
        starts = np.concatenate([[0], newlines + 1])
        ends = np.concatenate([newlines, [len(data)]])
        keep = np.flatnonzero(ends > starts)
        return RecordBlock(
            data,
            starts[keep].tolist(),
            ends[keep].tolist(),
            (keep + first_line).tolist(),
            "line",
            True,
            newlines.size,
        )
    from posttrainbench.task.integrity.contamination.paragraphs import paragraph_spans

    starts, ends = paragraph_spans(data)
    return RecordBlock(
        data, starts, ends, [s + byte_offset for s in starts], "paragraph at byte", False
    )


def row_records(path: Path, fmt: str) -> RecordBlock:
    """Records of a json, csv or parquet file, each re-encoded as one JSON line."""
    rows, label = _rows(path, fmt)
    parts, starts, ends = [], [], []
    pos = 0
    for row in rows:
        encoded = json.dumps(row, ensure_ascii=False, default=str).encode("utf-8")
        starts.append(pos)
        ends.append(pos + len(encoded))
        parts.append(encoded)
        pos += len(encoded) + 1
    return RecordBlock(b"\n".join(parts), starts, ends, list(range(len(rows))), label, True)


def _rows(path: Path, fmt: str) -> tuple[list, str]:
    if fmt == "json":
        try:
            value = json.loads(path.read_bytes())
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from exc
        return (value, "item") if isinstance(value, list) else ([value], "document")
    if fmt == "csv":
        import csv

        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            dialect = "excel-tab" if path.suffix.lower() == ".tsv" else "excel"
            return [row for row in csv.reader(handle, dialect=dialect)], "row"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(f"{path}: reading {fmt} needs pyarrow (pip install pyarrow)") from exc
    try:
        if fmt == "parquet":
            return pq.read_table(path).to_pylist(), "row"
        try:  # datasets writes the IPC stream format; other tools the file format
            return pa.ipc.open_stream(path).read_all().to_pylist(), "row"
        except pa.ArrowInvalid:
            return pa.ipc.open_file(path).read_all().to_pylist(), "row"
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: not a readable {fmt} file ({exc})") from exc


def split_points(path: Path, chunk_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges of a line-based file, each ending at a line (or paragraph) boundary."""
    size = path.stat().st_size
    ranges, start = [], 0
    with path.open("rb") as handle:
        while start < size:
            end = min(size, start + chunk_bytes)
            if end < size:
                handle.seek(end)
                # Extend to the next blank line for paragraphs, next newline for lines.
                tail = handle.readline()
                end += len(tail)
                if input_format(path) == "txt":
                    while end < size:
                        line = handle.readline()
                        end += len(line)
                        if not line.strip():
                            break
            ranges.append((start, end))
            start = end
    return ranges
