"""A prefilter that rules out records which cannot contain a test item, without tokenizing.

Tokenizing every record is what makes a naive checker slow (tiktoken runs at a few
MB/s). A record can only reach the threshold for an item if it contains at least
`min_question_hits` of the item's question n-grams, and it can only contain an n-gram
if it contains every substring of that n-gram's text. So each n-gram gets one
*signature*: an 8-byte window of its normalized text that starts at a word, chosen to
be rare among the test items. The scan (vectorscan.py) normalizes raw file bytes with
no JSON parsing and counts per record and item the n-grams whose signature occurs.
Only records reaching an item's minimum go on to exact tokenization.

Signatures never contain bytes whose raw encoding may differ from the decoded text
(non-ASCII, quotes, slashes, backslashes and the byte after one, characters some
encoders HTML-escape), so the filter never drops a record that the exact check would
flag; tests compare it with the naive checker.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from posttrainbench.task.integrity.contamination import vectorscan
from posttrainbench.task.integrity.contamination.index import ReferenceIndex

WINDOW = 8
HOT_DF = 4  # a signature found in more test items than this is "hot"
# Bytes whose raw encoding may differ between a file and its decoded text.
_UNSAFE = frozenset(range(0, 0x20)) | frozenset(range(0x7F, 0x100)) | frozenset(b'"\\/<>&')


def _byte_table() -> np.ndarray:
    """ASCII lowercase, and every ASCII whitespace byte to a space."""
    table = np.arange(256, dtype=np.uint8)
    table[ord("A") : ord("Z") + 1] += 32
    table[list(b" \t\n\r\f\v")] = 0x20
    return table


_TABLE = _byte_table().tobytes()


@dataclass
class Signatures:
    """Signature windows of all question n-grams, and which items each belongs to."""

    values: np.ndarray  # sorted uint64 window values
    item_ptr: np.ndarray  # CSR: signature i -> items[item_ptr[i]:item_ptr[i+1]]
    items: np.ndarray
    weights: np.ndarray  # how many of the item's n-grams share this signature
    min_hits: np.ndarray  # per item: n-grams a record must contain
    unsigned: np.ndarray  # per item: n-grams without a signature (always counted)
    always: list[int]  # items the filter cannot rule out (too few signatures)

    @classmethod
    def build(cls, index: ReferenceIndex) -> Signatures:
        """Choose one signature per question n-gram: its rarest safe word-start window."""
        from posttrainbench.task.integrity.contamination.tokens import cl100k

        enc = cl100k()
        per_item: list[list[list[int]]] = []  # per item, per question gram: its windows
        df: dict[int, int] = {}
        for grams, text in zip(index.grams, index.question_texts):
            raw = text.encode("utf-8")
            safe = _safe_mask(raw)
            windows = {}
            for start in range(1, len(raw) - WINDOW + 1):
                if raw[start - 1] == 0x20 and all(safe[start : start + WINDOW]):
                    windows[start] = int.from_bytes(raw[start : start + WINDOW], "little")
            for value in set(windows.values()):
                df[value] = df.get(value, 0) + 1
            # A window never starts on a gram's first byte: in a training file that
            # byte may follow a backslash, whose escape handling rewrites it.
            per_item.append(
                [
                    [windows[s] for s in range(a + 1, b - WINDOW + 1) if s in windows]
                    for a, b in _gram_spans(grams.question, raw, enc)
                ]
            )
        min_hits = np.array([g.min_question_hits for g in index.grams], dtype=np.int64)
        pairs: dict[tuple[int, int], int] = {}
        unsigned = np.zeros(len(index.grams), dtype=np.int64)
        for item, grams in enumerate(per_item):
            # Each gram's rarest window; hottest first, grams without any window first of all.
            chosen = sorted(
                (min(c, key=lambda v: (df[v], v)) if c else None for c in grams),
                key=lambda v: -df[v] if v is not None else -math.inf,
            )
            # Signatures shared by many items are costly to follow and say little: leave
            # the hottest grams unsigned (always counted), keeping the item filterable.
            budget = int(min_hits[item]) // 2
            for value in chosen:
                if value is None or (df[value] > HOT_DF and unsigned[item] < budget):
                    unsigned[item] += 1
                else:
                    pairs[(value, item)] = pairs.get((value, item), 0) + 1
        rows = sorted((value, item, w) for (value, item), w in pairs.items())
        values = np.array(sorted({r[0] for r in rows}), dtype=np.uint64)
        sig_of = np.searchsorted(values, np.array([r[0] for r in rows], dtype=np.uint64))
        item_ptr = np.concatenate(
            [[0], np.cumsum(np.bincount(sig_of, minlength=len(values)))]
        ).astype(np.int64)
        always = [i for i, g in enumerate(index.grams) if g.question and unsigned[i] >= min_hits[i]]
        return cls(
            values,
            item_ptr,
            np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2] for r in rows], dtype=np.int64),
            min_hits,
            unsigned,
            always,
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """The signatures as named arrays (for the on-disk cache); see from_arrays."""
        names = ("values", "item_ptr", "items", "weights", "min_hits", "unsigned")
        out = {name: getattr(self, name) for name in names}
        out["always"] = np.array(self.always, dtype=np.int64)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Signatures:
        """Signatures from what arrays() gave (raises KeyError, ValueError when malformed)."""
        sig = cls(
            values=arrays["values"].astype(np.uint64),
            item_ptr=arrays["item_ptr"].astype(np.int64),
            items=arrays["items"].astype(np.int64),
            weights=arrays["weights"].astype(np.int64),
            min_hits=arrays["min_hits"].astype(np.int64),
            unsigned=arrays["unsigned"].astype(np.int64),
            always=arrays["always"].astype(np.int64).tolist(),
        )
        # The scan indexes with these: refuse inconsistent arrays rather than fail there.
        n_sig, n_items = sig.values.size, sig.min_hits.size
        if (
            np.any(sig.values[1:] <= sig.values[:-1])  # sorted, distinct: found by bisection
            or sig.item_ptr.size != n_sig + 1
            or sig.item_ptr[0] != 0
            or sig.unsigned.size != n_items
            or sig.items.size != sig.weights.size
            or sig.items.size != int(sig.item_ptr[-1])
            or np.any(np.diff(sig.item_ptr) < 0)
            or (sig.items.size and (sig.items.min() < 0 or sig.items.max() >= n_items))
        ):
            raise ValueError("inconsistent signature arrays")
        return sig

    @functools.cached_property
    def scan_tables(self) -> vectorscan.ScanTables:
        """The scan's lookup tables, built on first use (in each process that scans)."""
        return vectorscan.ScanTables(self)

    def candidates(self, data: bytes, starts: list[int]) -> set[tuple[int, int]]:
        """(record, item) pairs that may reach the threshold; record i starts at starts[i]."""
        out = {(r, i) for r in range(len(starts)) for i in self.always}
        if len(self.values) == 0 or not starts:
            return out
        pairs = vectorscan.scan(data, np.asarray(starts, dtype=np.int64), _TABLE, self.scan_tables)
        out.update(map(tuple, pairs.tolist()))
        return out


def _safe_mask(raw: bytes) -> list[bool]:
    """Which bytes of normalized text a signature may contain."""
    safe = [b not in _UNSAFE for b in raw]
    for i, b in enumerate(raw[:-1]):
        if b == 0x5C:  # the byte after a backslash may be rewritten by escape handling
            safe[i + 1] = False
    return safe


def _gram_spans(grams, raw: bytes, enc) -> list[tuple[int, int]]:
    """Byte span of each question n-gram's first occurrence in the question bytes."""
    spans = []
    for gram in grams:
        piece = enc.decode_bytes(list(gram))
        start = raw.find(piece)
        # A gram always occurs (it was cut from this text); an empty span leaves it
        # without a signature, which only makes the filter more permissive.
        spans.append((start, start + len(piece)) if start >= 0 else (0, 0))
    return spans
