"""The values of a SQLite database file, read by SQLite itself from a copy in memory.

Text values and blobs of every ordinary table (virtual tables are skipped: their
modules could run code; their shadow tables hold the data and are ordinary). The
database is deserialized into a private in-memory connection (the file itself is never
opened), with the schema untrusted and queries only, and a progress handler that stops
a query once *in_time* says the deadline passed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator

PROGRESS_STEPS = 10_000  # SQLite VM steps between deadline checks


def sqlite_values(data: bytes, in_time: Callable[[], bool]) -> Iterator[tuple[str, str | bytes]]:
    """('table row N column C', value) for each text or blob value; ValueError when *data*
    is not a database SQLite can read."""
    conn = sqlite3.connect(":memory:")
    try:
        try:
            conn.deserialize(data)
            conn.execute("PRAGMA trusted_schema = OFF")
            conn.execute("PRAGMA query_only = ON")
            conn.set_progress_handler(lambda: 0 if in_time() else 1, PROGRESS_STEPS)
            tables = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
            ).fetchall()
        except (sqlite3.Error, OverflowError) as exc:
            raise ValueError(str(exc)) from None
        for (name,) in tables:
            quoted = '"' + str(name).replace('"', '""') + '"'
            try:
                for row_number, row in enumerate(conn.execute(f"SELECT * FROM {quoted}")):
                    for column, value in enumerate(row):
                        if isinstance(value, (str, bytes)) and value:
                            yield f"{name} row {row_number} column {column}", value
            except sqlite3.Error as exc:
                raise ValueError(f"table {name}: {exc}") from None
    finally:
        conn.close()
