"""The prefilter's inner loop, compiled with numba: one pass over raw bytes.

It normalizes bytes on the fly exactly as `normalize_text` would normalize the decoded
text (ASCII case folding, whitespace runs to one space, JSON escapes decoded or turned
into break bytes), reads the 8-byte window at every word start, tests it against the
signature bitmap, and counts per record and test item the distinct signatures found.
Records that reach an item's minimum come out as (record, item) candidate pairs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

SPACE = 0x20
BREAK = 0x01  # stands for bytes that no signature contains
BACKSLASH = 0x5C


@njit(cache=True, nogil=True)
def normalize(raw, table, starts, out, out_starts):
    """Normalized bytes of raw into out; out_starts[i] = where record i starts in out."""
    n = raw.shape[0]
    k = 0
    rec = 0
    n_rec = starts.shape[0]
    prev_space = True
    i = 0
    while i < n:
        while rec < n_rec and starts[rec] <= i:
            out_starts[rec] = k
            rec += 1
            prev_space = True  # a record starts fresh: no leading space
        c = raw[i]
        if c == BACKSLASH and i + 1 < n:
            d = raw[i + 1]
            if d == 0x6E or d == 0x74 or d == 0x72 or d == 0x66:  # \n \t \r \f
                if not prev_space:
                    out[k] = SPACE
                    k += 1
                    prev_space = True
            else:
                out[k] = BREAK
                out[k + 1] = BREAK
                k += 2
                prev_space = False
            i += 2
            continue
        c = table[c]
        if c == SPACE:
            if not prev_space:
                out[k] = SPACE
                k += 1
                prev_space = True
        else:
            out[k] = c
            k += 1
            prev_space = False
        i += 1
    while rec < n_rec:
        out_starts[rec] = k
        rec += 1
    return k


@njit(cache=True, nogil=True)
def count_candidates(
    norm,
    length,
    out_starts,
    slot_values,
    slot_ids,
    shift,
    mul,
    item_ptr,
    items,
    weights,
    min_hits,
    unsigned,
    seen_stamp,
    counts,
    touched,
    pairs_out,
):
    """Candidate (record, item) pairs into pairs_out; returns how many (-1: no room)."""
    n_rec = out_starts.shape[0]
    mask = np.uint64(slot_values.shape[0] - 1)
    n_pairs = 0
    for rec in range(n_rec):
        begin = out_starts[rec]
        end = out_starts[rec + 1] if rec + 1 < n_rec else length
        n_touched = 0
        for k in range(begin + 1, end - 7):
            # Signature windows start right after a space (at a word).
            if norm[k - 1] != SPACE:
                continue
            v = np.uint64(0)
            for j in range(8):
                v |= np.uint64(norm[k + j]) << np.uint64(8 * j)
            slot = (v * mul) >> shift
            while slot_values[slot] != 0 and slot_values[slot] != v:
                slot = (slot + np.uint64(1)) & mask
            if slot_values[slot] == 0:
                continue
            sid = slot_ids[slot]
            if seen_stamp[sid] == rec + 1:
                continue
            seen_stamp[sid] = rec + 1
            for p in range(item_ptr[sid], item_ptr[sid + 1]):
                item = items[p]
                if counts[item] == 0:
                    touched[n_touched] = item
                    n_touched += 1
                counts[item] += weights[p]
        for t in range(n_touched):
            item = touched[t]
            if counts[item] + unsigned[item] >= min_hits[item]:
                if n_pairs == pairs_out.shape[0]:
                    return -1  # the caller retries with more room
                pairs_out[n_pairs, 0] = rec
                pairs_out[n_pairs, 1] = item
                n_pairs += 1
            counts[item] = 0
    return n_pairs


def warm_up() -> None:
    """Load both compiled functions (from numba's cache when it has them) in this process."""
    raw = np.frombuffer(b"a b", dtype=np.uint8)
    norm = np.empty(4, dtype=np.uint8)
    starts = np.zeros(1, dtype=np.int64)
    length = normalize(raw, np.arange(256, dtype=np.uint8), starts, norm, starts.copy())
    one = np.ones(1, dtype=np.int64)
    count_candidates(
        norm,
        length,
        starts,
        np.zeros(2, dtype=np.uint64),
        np.zeros(2, dtype=np.int64),
        np.uint64(63),
        np.uint64(1),
        np.zeros(2, dtype=np.int64),
        one,
        one,
        one,
        one,
        np.zeros(1, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        np.empty(1, dtype=np.int64),
        np.empty((1, 2), dtype=np.int64),
    )
