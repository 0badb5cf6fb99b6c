"""The prefilter's scan of raw file bytes, in whole-array numpy operations.

For a slice of records (at most SLICE_BYTES, so a worker's memory stays bounded):

1. ASCII case folding and whitespace mapping (``bytes.translate``), then JSON escapes as
   same-length substitutions: ``\\n \\t \\r \\f`` two spaces (they collapse like any
   whitespace), any other escape two break bytes.
2. Whitespace runs collapse to one space; a record's leading whitespace is dropped.
3. At every word start, the 8-byte window (one unaligned little-endian load) goes
   through a one-byte-per-bucket hash filter; the few that pass are looked up exactly
   in the sorted signature values.
4. Only hits (a small share) go on to the per-record bookkeeping, one sort: distinct
   signatures per record, weighted counts per (record, item).

Every step is a handful of passes over the slice with no Python loop per byte or record;
tests compare the result with a byte-by-byte reference implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from posttrainbench.task.integrity.contamination.prefilter import Signatures

SPACE = 0x20
BREAK = 0x01  # stands for bytes that no signature contains
BACKSLASH = 0x5C
WINDOW = 8
# Records are scanned in slices of about this many bytes: the scan's arrays take about
# ten times the slice, and slices of a few MB stay fast (mostly in cache).
SLICE_BYTES = 1024 * 1024
_FILTER_BITS = 20  # 1 MiB filter; ~2% of non-signature windows pass it for 23k signatures
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)
_ESCAPED_SPACE = np.zeros(256, dtype=bool)
_ESCAPED_SPACE[list(b"ntrf")] = True
_EMPTY_PAIRS = np.empty((0, 2), dtype=np.int64)
_PAD = bytes(WINDOW)


class ScanTables:
    """What the scan needs from the signatures, derived once per process."""

    def __init__(self, signatures: Signatures):
        sig = signatures
        self.values = sig.values
        self.item_ptr = sig.item_ptr
        self.n_items = sig.min_hits.size
        self.need = sig.min_hits - sig.unsigned
        self.shift = np.uint64(64 - _FILTER_BITS)
        with np.errstate(over="ignore"):
            buckets = (sig.values * _HASH_MUL) >> self.shift
        self.filter = np.zeros(1 << _FILTER_BITS, dtype=bool)
        self.filter[buckets] = True
        # Each (signature, item) entry's rank in (item, signature) order: sorting the
        # hits by (record, rank) groups them by (record, item) in one sort.
        sid = np.repeat(np.arange(sig.values.size), np.diff(sig.item_ptr))
        order = np.lexsort((sid, sig.items))
        self.rank = np.empty(sig.items.size, dtype=np.int64)
        self.rank[order] = np.arange(sig.items.size)
        self.item_by_rank = sig.items[order]
        self.weight_by_rank = sig.weights[order]

    def lookup(self, windows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which windows are signatures, their signature indices)."""
        with np.errstate(over="ignore"):
            buckets = windows * _HASH_MUL
        buckets >>= self.shift
        maybe = np.flatnonzero(self.filter[buckets])
        values = windows[maybe]
        sid = np.searchsorted(self.values, values)
        sid[sid == self.values.size] = 0
        hit = self.values[sid] == values
        return maybe[hit], sid[hit]


def escape_starts(raw: np.ndarray) -> np.ndarray:
    """Positions of the backslashes that start a JSON escape (each needs a byte after it)."""
    bs = np.flatnonzero(raw[:-1] == BACKSLASH)
    if bs.size < 2 or not np.any(bs[1:] == bs[:-1] + 1):
        return bs  # no backslash runs (the common case): each one starts an escape
    # In a run of backslashes, every other one (from the run's start) starts an escape.
    run_start = np.ones(bs.size, dtype=bool)
    run_start[1:] = bs[1:] != bs[:-1] + 1
    first = np.maximum.accumulate(np.where(run_start, np.arange(bs.size), 0))
    return bs[(np.arange(bs.size) - first) % 2 == 0]


def normalize_block(
    data: bytes, table: bytes, starts: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """(normalized bytes followed by WINDOW zero bytes, their length, where each record
    starts in them). *table* maps every byte (case folding, whitespace to a space)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    # WINDOW zero bytes of padding (the table keeps 0 as 0) for the last windows' loads.
    mapped = np.frombuffer((data + _PAD).translate(table), dtype=np.uint8)
    if data.find(b"\\", 0, len(data) - 1) >= 0:
        esc = escape_starts(raw)
        mapped = mapped.copy()
        value = np.where(_ESCAPED_SPACE[raw[esc + 1]], SPACE, BREAK).astype(np.uint8)
        mapped[esc] = value
        mapped[esc + 1] = value
    space = mapped == SPACE
    drop = np.zeros_like(space)
    drop[0] = space[0]
    np.logical_and(space[1:], space[:-1], out=drop[1:])
    inside = starts[starts < raw.size]
    drop[inside] = space[inside]  # a record starts fresh: no leading space
    dropped = np.flatnonzero(drop)
    norm = mapped[~drop]
    return norm, norm.size - WINDOW, starts - np.searchsorted(dropped, starts)


def _windows(norm: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Word starts (right after a space) with a full window, and the windows."""
    positions = np.flatnonzero(norm[: length - 1] == SPACE)
    positions += 1
    positions = positions[: np.searchsorted(positions, length - WINDOW, side="right")]
    # Unaligned 8-byte loads; norm has WINDOW zero bytes of padding at its end.
    view = np.ndarray(shape=(length,), dtype="<u8", buffer=norm.data, strides=(1,))
    return positions, view[positions]


def count_candidates(
    norm: np.ndarray, length: int, norm_starts: np.ndarray, tables: ScanTables
) -> np.ndarray:
    """(record, item) pairs whose signature count reaches the item's minimum, (n, 2) int64."""
    if length <= WINDOW:
        return _EMPTY_PAIRS  # no room for a window after a space
    positions, windows = _windows(norm, length)
    hit, sid = tables.lookup(windows)
    positions = positions[hit]
    # A window counts for the record holding its preceding space and its last byte.
    rec = np.searchsorted(norm_starts, positions - 1, side="right") - 1
    ends = np.append(norm_starts[1:], length)
    ok = (rec >= 0) & (positions + WINDOW <= ends[rec])
    rec, sid = rec[ok], sid[ok]
    if rec.size == 0:
        return _EMPTY_PAIRS
    lo = tables.item_ptr[sid]
    reps = tables.item_ptr[sid + 1] - lo
    if np.all(reps == 1):
        entry = lo
    else:  # one hit per (signature, item) entry
        rec = np.repeat(rec, reps)
        entry = np.repeat(lo - (np.cumsum(reps) - reps), reps) + np.arange(int(reps.sum()))
    n_entries = tables.rank.size
    key = rec * n_entries + tables.rank[entry]
    key.sort()
    key = key[np.concatenate(([True], key[1:] != key[:-1]))]  # a signature counts once
    rec = key // n_entries
    rank = key - rec * n_entries
    item = tables.item_by_rank[rank]
    group = rec * tables.n_items + item
    bounds = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    totals = np.add.reduceat(tables.weight_by_rank[rank], bounds)
    rec, item = rec[bounds], item[bounds]
    chosen = totals >= tables.need[item]
    return np.stack([rec[chosen], item[chosen]], axis=1)


def slices(starts: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive record ranges [a, b) whose bytes span about *limit* at most each
    (a single longer record makes a slice of its own)."""
    out = []
    first = 0
    n = starts.size
    while first < n:
        # The first record that starts *limit* bytes or more past this slice's start.
        last = int(np.searchsorted(starts, starts[first] + limit, side="left"))
        last = max(last, first + 1)
        out.append((first, last))
        first = last
    return out


def scan(data: bytes, starts: np.ndarray, table: bytes, tables: ScanTables) -> np.ndarray:
    """Candidate (record, item) pairs of a block, scanned slice by slice; (n, 2) int64."""
    found = []
    for a, b in slices(starts, SLICE_BYTES):
        begin = int(starts[a])
        end = int(starts[b]) if b < starts.size else len(data)
        norm, length, norm_starts = normalize_block(data[begin:end], table, starts[a:b] - begin)
        pairs = count_candidates(norm, length, norm_starts, tables)
        if pairs.size:
            pairs[:, 0] += a
            found.append(pairs)
    return np.concatenate(found) if found else _EMPTY_PAIRS
