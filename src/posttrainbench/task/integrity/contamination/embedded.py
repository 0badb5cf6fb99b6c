"""Compressed streams anywhere in a binary, and the high-entropy bytes nothing opened.

A file need not start with its container's magic: a pip HTTP-cache entry is a header
and then a wheel, a git pack is a run of zlib streams, a database page holds blobs
between record headers. :func:`scan_binary` looks at every offset of a binary chunk:

- **signatures**: gzip, zlib (git objects, PNG chunks), bz2, xz, ``.lzma`` (LZMA
  alone), zip local headers (stored or deflated members, also with no central
  directory), each decoded where it starts; zstd (without the ``zstandard`` package),
  7z and rar are listed unread;
- **headerless streams**: raw deflate and raw LZMA1/LZMA2 have no magic, so they are
  tried where one may start (the chunk's start, right after a readable or zero-filled
  run, right after a decoded stream, at the edge of a high-entropy region) when the
  bytes there look compressed, within :data:`MAX_RAW_TRIES_PER_MB` tries;
- **unread**: what is left is measured in :data:`WINDOW`-byte windows; a window whose
  byte entropy reaches :data:`HIGH_ENTROPY_BITS` (compressed or encrypted bytes: ~7.8
  bits; float32 tensors ~7.2, code and text below 6.5) that no decoder covered is
  unread, and the caller lists it (unpack.UnpackBudget.not_read).

Every decoded byte counts against *room* (the caller's budget); a decoder stops there.
"""

from __future__ import annotations

import bz2
import functools
import lzma
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

WINDOW = 1024
STRIDE = 512
HIGH_ENTROPY_BITS = 7.6
MIN_OUTPUT = 16  # a decode giving less is noise (a chance header in random bytes)
# Headerless streams carry no checksum: random bytes often "decode" (an LZMA2 chunk
# stored as is, a short deflate block). Real compressed data grows when decoded; noise
# that decodes does not, and is not taken for a stream (its bytes stay as they are).
MIN_RAW_RATIO = 1.25
MAX_RAW_TRIES_PER_MB = 8192
MIN_RAW_TRIES = 4096
# A stream may start a few bytes after the run before it (a length, a tag), or a few
# bytes before the run seems to end: its first bytes may happen to be printable (the
# chance that 16 compressed bytes in a row are is about 1e-7).
RAW_BEFORE, RAW_AFTER = 16, 8
PROBE = 64
PROBE_IN, PROBE_OUT = 4096, 65536
PROBE_DISTINCT = 40  # distinct bytes among PROBE: compressed ~57, text ~25
# A lookahead: every start is found, also one inside another's match (non-overlapping
# matches would let a chance match hide the real header a few bytes on).
_SIGNATURES = re.compile(
    rb"(?=\x1f\x8b\x08"  # gzip
    rb"|\x78[\x01\x5e\x9c\xda]"  # zlib
    rb"|BZh[1-9]1AY&SY"  # bz2
    rb"|\xfd7zXZ\x00"  # xz
    rb"|\x5d[\x00-\xff]{4}(?:\xff{8}|[\x00-\xff]{5}\x00\x00)"  # .lzma: props, dict, size
    rb"|PK\x03\x04"  # zip local header
    rb"|\x28\xb5\x2f\xfd|7z\xbc\xaf\x27\x1c|Rar!\x1a\x07)",  # zstd, 7z, rar
    re.DOTALL,
)
_UNREAD_MAGIC = {b"\x28\xb5\x2f\xfd": "zstd", b"7z\xbc\xaf": "7z", b"Rar!": "rar"}
_RUN_ENDS = re.compile(rb"[\x20-\x7e\t\r\n]{8,}|\x00{4,}")
_LZMA_RAW = (
    [{"id": lzma.FILTER_LZMA1}],
    [{"id": lzma.FILTER_LZMA2}],  # an 8 MiB dictionary, preset 6's
)


@dataclass
class Decoded:
    """One stream found in the chunk: where, what, and its decoded bytes."""

    offset: int
    end: int
    name: str
    data: bytes


@dataclass
class BinaryScan:
    """What :func:`scan_binary` found."""

    decoded: list[Decoded] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    raw_tries: int = 0


def scan_binary(
    data: bytes, room: int, in_time: Callable[[], bool], opaque_ok: bool = False
) -> BinaryScan:
    """Streams at any offset of *data* (decoding at most *room* bytes in all) and, unless
    *opaque_ok* (native code: see unpack.OPAQUE), the high-entropy ranges left unread."""
    scan = BinaryScan()
    view = memoryview(data)
    covered: list[tuple[int, int]] = []
    ends: list[int] = [0]

    def take(found: Decoded | None) -> bool:
        nonlocal room
        if found is None:
            return False
        scan.decoded.append(found)
        covered.append((found.offset, found.end))
        ends.append(found.end)
        room -= len(found.data)
        return True

    for match in _SIGNATURES.finditer(data):
        at = match.start()
        if room <= 0 or not in_time():
            break
        if any(a <= at < b for a, b in covered):
            continue
        magic = data[at : at + 4]
        unread = next((n for m, n in _UNREAD_MAGIC.items() if magic.startswith(m)), None)
        if unread is not None:
            # In native code, as its high-entropy bytes (compressed debug sections).
            if not _has_decoder(unread) and not opaque_ok:
                scan.unread.append(f"{unread} data at byte {at} (no decoder here)")
            continue
        take(_at_signature(view, at, room))
    regions = [] if opaque_ok else _high_entropy(data)
    limit = max(MIN_RAW_TRIES, MAX_RAW_TRIES_PER_MB * len(data) // (1 << 20))
    skip_to = 0
    # Native code is searched only where a stream ended or at its start (OPAQUE).
    for at in _raw_starts(data, ends, regions, runs=not opaque_ok):
        if room <= 0 or scan.raw_tries >= limit or not in_time():
            break
        if at < skip_to or any(a <= at < b for a, b in covered):
            continue
        if len(set(data[at : at + PROBE])) * PROBE < PROBE_DISTINCT * min(PROBE, len(data) - at):
            continue
        scan.raw_tries += 1
        if take(_raw(view, at, room)):
            skip_to = covered[-1][1]
    if not opaque_ok:
        if scan.raw_tries >= limit:
            scan.unread.append(f"the search for headerless streams stopped after {limit} tries")
        for a, b in _merge(r for r in regions if not _inside(r, covered)):
            scan.unread.append(f"bytes {a}-{b}: high-entropy data no decoder opened")
    return scan


def _has_decoder(name: str) -> bool:
    if name != "zstd":
        return False
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def _at_signature(view: memoryview, at: int, room: int) -> Decoded | None:
    head = bytes(view[at : at + 6])
    if head.startswith(b"\x1f\x8b"):
        return _stream(view, at, room, "gzip", lambda: zlib.decompressobj(16 + zlib.MAX_WBITS))
    if head[:1] == b"\x78":
        if (head[0] * 256 + head[1]) % 31:
            return None
        return _stream(view, at, room, "zlib", zlib.decompressobj)
    if head.startswith(b"BZh"):
        return _stream(view, at, room, "bz2", bz2.BZ2Decompressor)
    if head.startswith(b"\xfd7zXZ"):
        return _stream(view, at, room, "xz", lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ))
    if head[:1] == b"\x5d":
        # No checksum: a sane dictionary size (2^n or 3 * 2^(n-1), 4 KiB to 1.5 GiB) and
        # output that grows, as for headerless streams.
        dict_size = struct.unpack("<I", bytes(view[at + 1 : at + 5]))[0]
        if not any(dict_size in (1 << n, 3 << (n - 1)) for n in range(12, 31)):
            return None
        return _stream(
            view,
            at,
            room,
            "lzma",
            lambda: lzma.LZMADecompressor(lzma.FORMAT_ALONE),
            MIN_RAW_RATIO,
        )
    return _zip_member(view, at, room)


def _stream(
    view: memoryview,
    at: int,
    room: int,
    name: str,
    make: Callable[[], object],
    min_ratio: float = 0.0,
) -> Decoded | None:
    """Decode one stream starting at *at*; None unless it ends (or fills *room*) cleanly."""
    decoder = make()
    # The end of the input the decoder was given: its unused_data counts back from there.
    fed_to = min(len(view), at + PROBE_IN)
    try:
        # A first bounded step: noise fails or ends within it, at little cost.
        out = decoder.decompress(view[at:fed_to], min(room, PROBE_OUT))  # type: ignore[attr-defined]
        if not getattr(decoder, "eof", False) and len(out) < room and fed_to < len(view):
            decoder = make()
            fed_to = len(view)
            out = decoder.decompress(view[at:], room)  # type: ignore[attr-defined]
    except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError, MemoryError):
        return None
    ended = getattr(decoder, "eof", False)
    if len(out) < MIN_OUTPUT or not (ended or len(out) >= room):
        return None
    unused = len(getattr(decoder, "unused_data", b""))
    end = fed_to - unused if ended else fed_to
    if ended and len(out) < min_ratio * (end - at):
        return None
    return Decoded(at, end, f"{name}@{at}", out)


def _zip_member(view: memoryview, at: int, room: int) -> Decoded | None:
    """A zip member from its local header (no central directory needed)."""
    header = bytes(view[at : at + 30])
    if len(header) < 30:
        return None
    _sig, _ver, flags, method, _t, _d, _crc, packed, _size, name_len, extra_len = struct.unpack(
        "<4sHHHHHIIIHH", header
    )
    start = at + 30 + name_len + extra_len
    name = bytes(view[at + 30 : at + 30 + name_len]).decode("utf-8", "replace")
    if flags & 0x1:
        return None  # encrypted: the caller sees it as high-entropy bytes, unread
    if method == 0 and packed:
        data = bytes(view[start : start + min(packed, room)])
        return Decoded(at, start + len(data), f"zip member {name}@{at}", data)
    if method == 8:
        found = _stream(view, start, room, "deflate", lambda: zlib.decompressobj(-zlib.MAX_WBITS))
        if found is not None:
            return Decoded(at, found.end, f"zip member {name}@{at}", found.data)
    return None


def _raw_starts(
    data: bytes, ends: list[int], regions: list[tuple[int, int]], runs: bool
) -> list[int]:
    """Offsets where a headerless stream may start (see the module docstring) whose next
    PROBE bytes look compressed: a quarter or more of them 0x80 and up (text has none,
    compressed bytes half), ascending."""
    n = len(data) - MIN_OUTPUT
    if n <= 0:
        return []
    base = np.array(
        sorted(
            {
                0,
                *ends,
                *((m.end() for m in _RUN_ENDS.finditer(data)) if runs else ()),
                *(a for a, _ in regions),
            }
        ),
        dtype=np.int64,
    )
    offsets = np.unique((base[:, None] + np.arange(-RAW_BEFORE, RAW_AFTER)).ravel())
    offsets = offsets[(offsets >= 0) & (offsets < n)]
    high = np.concatenate([[0], np.cumsum(np.frombuffer(data, dtype=np.uint8) >= 0x80)])
    stop = np.minimum(offsets + PROBE, len(data))
    keep = (high[stop] - high[offsets]) * 4 >= stop - offsets
    return offsets[keep].tolist()


def _raw(view: memoryview, at: int, room: int) -> Decoded | None:
    """A headerless stream at *at*: raw deflate, else raw LZMA1/LZMA2 where it may start."""
    found = _stream(
        view,
        at,
        room,
        "raw deflate",
        lambda: zlib.decompressobj(-zlib.MAX_WBITS),
        MIN_RAW_RATIO,
    )
    if found is not None:
        return found
    first = view[at]
    for filters in _LZMA_RAW:
        lzma2 = filters[0]["id"] == lzma.FILTER_LZMA2
        # LZMA1's range coder starts with a zero byte; LZMA2's first chunk resets the
        # dictionary (control byte 1, or 0xE0 and up).
        may_start = (first == 1 or first >= 0xE0) if lzma2 else first == 0
        if not may_start:
            continue
        found = _stream(
            view,
            at,
            room,
            "raw lzma2" if lzma2 else "raw lzma",
            functools.partial(lzma.LZMADecompressor, lzma.FORMAT_RAW, filters=filters),
            MIN_RAW_RATIO,
        )
        if found is not None:
            return found
    return None


def _high_entropy(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each WINDOW-byte window (every STRIDE bytes) of high byte entropy."""
    out = []
    arr = np.frombuffer(data, dtype=np.uint8)
    for start in range(0, max(0, len(data) - WINDOW) + 1, STRIDE):
        window = arr[start : start + WINDOW]
        if len(window) < WINDOW:
            break
        counts = np.bincount(window, minlength=256)
        p = counts[counts > 0] / WINDOW
        if -(p * np.log2(p)).sum() >= HIGH_ENTROPY_BITS:
            out.append((start, start + WINDOW))
    return out


def _inside(region: tuple[int, int], covered: list[tuple[int, int]]) -> bool:
    """Whether decoded streams cover most of the window (the rest may be headers: a git
    pack's objects are small streams, each behind a few bytes of its own header)."""
    a, b = region
    return sum(max(0, min(b, e) - max(a, s)) for s, e in covered) >= (b - a) // 2


def _merge(regions) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in regions:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged
