"""The prefilter's scan in whole-array numpy operations: the same pairs as kernel.py.

numba costs about 2 s per process before its first compiled call (its import and its
target initialization), more than a small input takes to scan; and a check is run
often. This module does the kernel's work with numpy alone, and gives exactly its
candidate pairs (tests compare them):

1. JSON escapes become same-length byte substitutions: ``\\n \\t \\r \\f`` two spaces
   (they collapse to one, like any whitespace), any other escape two break bytes.
2. ASCII case folding and whitespace mapping through the byte table.
3. Whitespace runs collapse to one space; a record's leading whitespace is dropped.
4. At every word start, the 8-byte window (one unaligned little-endian load) is looked up
   in the signatures' open-addressing table; only hits (a small share) go on to the
   per-record bookkeeping: distinct signatures per record, weighted counts per item.
"""

from __future__ import annotations

import numpy as np

SPACE = 0x20
BREAK = 0x01
BACKSLASH = 0x5C
WINDOW = 8
_ESCAPED_SPACE = np.zeros(256, dtype=bool)
_ESCAPED_SPACE[list(b"ntrf")] = True


def _substitute_escapes(raw: np.ndarray) -> np.ndarray:
    """A copy of raw with each escape pair replaced as described in the module docstring."""
    out = raw.copy()
    bs = np.flatnonzero(raw[:-1] == BACKSLASH)  # an escape needs a byte after it
    if bs.size == 0:
        return out
    # In a run of backslashes, every other one (from the run's start) starts an escape.
    run_start = np.ones(bs.size, dtype=bool)
    run_start[1:] = bs[1:] != bs[:-1] + 1
    first = np.maximum.accumulate(np.where(run_start, np.arange(bs.size), 0))
    starts = bs[(np.arange(bs.size) - first) % 2 == 0]
    spaces = _ESCAPED_SPACE[raw[starts + 1]]
    value = np.where(spaces, SPACE, BREAK).astype(np.uint8)
    out[starts] = value
    out[starts + 1] = value
    return out


def normalize_block(
    raw: np.ndarray, table: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Normalized bytes and where each record starts in them (as kernel.normalize)."""
    mapped = table[_substitute_escapes(raw)]
    space = mapped == SPACE
    prev_space = np.empty_like(space)
    prev_space[0] = True
    prev_space[1:] = space[:-1]
    prev_space[starts[starts < raw.size]] = True
    keep = ~(space & prev_space)
    norm = mapped[keep]
    # Kept bytes before each record start: the record's offset in norm.
    kept_before = np.concatenate([[0], np.cumsum(np.add.reduceat(keep, starts, dtype=np.int64))])
    head = int(np.count_nonzero(keep[: starts[0]])) if starts[0] > 0 else 0
    return norm, (kept_before[:-1] + head) if starts.size else kept_before[:0]


def _windows(norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of word starts that have a full window after them, and the windows."""
    padded = np.zeros(norm.size + WINDOW, dtype=np.uint8)
    padded[: norm.size] = norm
    positions = np.flatnonzero(norm[:-1] == SPACE) + 1
    positions = positions[positions + WINDOW <= norm.size]
    view = np.ndarray(
        shape=(norm.size,), dtype="<u8", buffer=padded.data, strides=(1,)
    )  # unaligned 8-byte loads
    return positions, view[positions]


def _lookup(values: np.ndarray, slot_values: np.ndarray, slot_ids: np.ndarray, shift, mul):
    """Signature index of each value, -1 where it is none (linear probing, as build_slots)."""
    mask = np.uint64(slot_values.size - 1)
    with np.errstate(over="ignore"):
        slot = (values * mul) >> shift
    found = np.full(values.size, -1, dtype=np.int64)
    todo = np.arange(values.size)
    while todo.size:
        current = slot_values[slot[todo]]
        hit = current == values[todo]
        found[todo[hit]] = slot_ids[slot[todo[hit]]]
        todo = todo[(current != 0) & ~hit]
        slot[todo] = (slot[todo] + np.uint64(1)) & mask
    return found


def count_candidates(norm, out_starts, signatures, table_shift, mul) -> np.ndarray:
    """(record, item) candidate pairs, an (n, 2) int64 array, as kernel.count_candidates."""
    positions, windows = _windows(norm)
    sid = _lookup(windows, signatures.slot_values, signatures.slot_ids, table_shift, mul)
    hit = sid >= 0
    positions, sid = positions[hit], sid[hit]
    # A window counts for the record holding its preceding space and its last byte.
    rec = np.searchsorted(out_starts, positions - 1, side="right") - 1
    last = np.searchsorted(out_starts, positions + WINDOW - 1, side="right") - 1
    ok = (rec >= 0) & (rec == last)
    rec, sid = rec[ok], sid[ok]
    if rec.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    n_sig = signatures.values.size
    pair = np.unique(rec * n_sig + sid)
    rec, sid = pair // n_sig, pair % n_sig
    lo, hi = signatures.item_ptr[sid], signatures.item_ptr[sid + 1]
    reps = hi - lo
    rec = np.repeat(rec, reps)
    at = np.repeat(lo - np.concatenate([[0], np.cumsum(reps)[:-1]]), reps) + np.arange(reps.sum())
    item, weight = signatures.items[at], signatures.weights[at]
    n_items = signatures.min_hits.size
    keys, inverse = np.unique(rec * n_items + item, return_inverse=True)
    totals = np.bincount(inverse, weights=weight).astype(np.int64)
    rec, item = keys // n_items, keys % n_items
    need = signatures.min_hits[item] - signatures.unsigned[item]
    chosen = totals >= need
    return np.stack([rec[chosen], item[chosen]], axis=1)
