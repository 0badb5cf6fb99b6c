"""Rows of a benchmark's source file: JSON Lines, JSON, CSV or Parquet (optionally gzipped).

The one reader behind both routes into the data cache: the files ``ptb data prepare``
downloads and the files ``ptb data import`` finds on disk, so the two cannot disagree on
what a file holds. Stdlib, plus pyarrow (a dependency of the package) for Parquet.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable
from typing import Any

Row = dict[str, Any]
FORMATS = (".jsonl", ".json", ".csv", ".parquet")


class RowsError(ValueError):
    """A source file is unreadable, empty, or lacks a column the benchmark needs."""


def file_format(name: str) -> str | None:
    """The format suffix of *name* (``.jsonl``, ``.json``, ``.csv``, ``.parquet``), ignoring ``.gz``."""
    lower = name.lower().removesuffix(".gz")
    return next((fmt for fmt in FORMATS if lower.endswith(fmt)), None)


def read_rows(name: str, body: bytes, where: str | None = None) -> list[Row]:
    """The rows of one file whose format its *name* tells; RowsError names *where* (default *name*)."""
    where = where or name
    fmt = file_format(name)
    if fmt is None:
        raise RowsError(
            f"{where}: unsupported format (expected {', '.join(FORMATS)}, optionally .gz)"
        )
    try:
        if name.lower().endswith(".gz"):
            body = gzip.decompress(body)
        if fmt == ".parquet":
            return _parquet_rows(body)
        text = body.decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise RowsError(
            f"{where}: not a readable {fmt.lstrip('.')} file ({_one_line(exc)})"
        ) from None
    except RowsError as exc:
        raise RowsError(f"{where}: {exc}") from None
    if fmt == ".csv":
        return list(csv.DictReader(io.StringIO(text)))
    return _json_rows(where, text)


def check_columns(rows: list[Row], columns: Iterable[str], where: str) -> None:
    """Every row is an object with each of *columns* (``a|b``: either name); else RowsError."""
    if not rows:
        raise RowsError(f"{where}: no rows")
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise RowsError(f"{where}: row {i} is not an object with named columns")
        missing = [c for c in columns if not any(alt in row for alt in c.split("|"))]
        if missing:
            has = ", ".join(sorted(map(str, row))) or "none"
            raise RowsError(
                f"{where}: row {i} lacks column(s) {', '.join(missing)} (it has: {has})"
            )


def _json_rows(name: str, text: str) -> list[Row]:
    """A JSON list of rows, or one JSON value per line (mirrors use both, whatever the suffix)."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError as exc:
            raise RowsError(f"{name}: not valid JSON ({exc})") from None
        return list(value)
    rows = []
    # split on "\n" only: str.splitlines() also breaks at U+2028 etc. inside JSON strings
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise RowsError(f"{name}: line {number} is not JSON ({exc})") from None
    return rows


def _parquet_rows(body: bytes) -> list[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(pa.BufferReader(body)).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise RowsError(f"not a readable parquet file ({_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    # The CLI prints errors on one line; some library messages span several.
    return " ".join(str(exc).split())
