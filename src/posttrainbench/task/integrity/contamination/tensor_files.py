"""Checkpoint formats: what in them can hold text, and what is only numbers.

Checkpoints are most of what a training run writes (gigabytes per save), so the scan
reads their text and skips their numbers instead of reading every byte:

- safetensors: the header (names, ``__metadata__``) is text; floating-point tensors are
  skipped; byte-like tensors (U8, I8, BOOL) could be encoded text and are returned
  for scanning. A header whose tensors do not tile the file exactly is not trusted:
  the whole file is then scanned as a binary.
- a pickle (and the ``data.pkl`` of a torch zip checkpoint): every string and bytes
  constant, read with :mod:`pickletools` (never unpickled, so nothing runs). The
  storage classes it names tell whether the zip's storages are all floating point.
- ``.npy``: unicode and byte arrays are text; numeric arrays (but one-byte integers)
  are skipped.

A number array can still carry bytes in disguise; the scan does not decode that (see
docs/security.md).
"""

from __future__ import annotations

import ast
import json
import pickletools
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

FLOAT_DTYPES = frozenset(
    {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2"}
)
MAX_HEADER_BYTES = 100 * 1024 * 1024
FLOAT_STORAGES = frozenset(
    {
        "FloatStorage",
        "DoubleStorage",
        "HalfStorage",
        "BFloat16Storage",
        "Float8_e4m3fnStorage",
        "Float8_e5m2Storage",
    }
)
_PICKLE_STRINGS = frozenset(
    {
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        "UNICODE",
        "STRING",
        "BINSTRING",
        "SHORT_BINSTRING",
        "SHORT_BINBYTES",
        "BINBYTES",
        "BINBYTES8",
        "BYTEARRAY8",
    }
)


@dataclass
class Split:
    """A checkpoint split into what to scan and what was skipped as numbers."""

    text: list[bytes] = field(default_factory=list)  # text to scan as is
    binary: list[tuple[int, int]] = field(
        default_factory=list
    )  # (offset, length): scan as a binary
    skipped_bytes: int = 0  # numeric data not scanned
    note: str = ""
    utf32: bool = False  # the binary spans are UTF-32 text


def safetensors_split(handle: BinaryIO, size: int) -> Split | None:
    """The split of a safetensors file (read from *handle*, *size* bytes long), or None when
    it is not one whose header accounts for every byte."""
    handle.seek(0)
    head = handle.read(9)
    if len(head) < 9 or head[8:9] != b"{":
        return None
    (length,) = struct.unpack("<Q", head[:8])
    if length > MAX_HEADER_BYTES or 8 + length > size:
        return None
    handle.seek(8)
    raw = handle.read(length)
    try:
        header = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(header, dict):
        return None
    spans = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = (int(x) for x in meta["data_offsets"])
            dtype = str(meta["dtype"])
        except (KeyError, TypeError, ValueError):
            return None
        spans.append((begin, end, dtype))
    split = Split(text=[raw], note=f"safetensors: {len(spans)} tensors")
    body, position = size - 8 - length, 0
    for begin, end, dtype in sorted(spans):
        if begin != position or end < begin or end > body:
            return None  # a gap, an overlap or a tail: bytes no tensor accounts for
        if dtype in FLOAT_DTYPES:
            split.skipped_bytes += end - begin
        elif end > begin:
            split.binary.append((8 + length + begin, end - begin))
        position = end
    return split if position == body else None


def npy_split(handle: BinaryIO, size: int) -> Split | None:
    """The split of a .npy array, or None when it is not one."""
    handle.seek(0)
    head = handle.read(12)
    if not head.startswith(b"\x93NUMPY") or len(head) < 10:
        return None
    if head[6] == 1:
        (length,), start = struct.unpack("<H", head[8:10]), 10
    else:
        (length,), start = struct.unpack("<I", head[8:12]), 12
    handle.seek(start)
    try:
        header = ast.literal_eval(handle.read(min(length, 65536)).decode("latin-1"))
        descr = str(header["descr"])
    except (ValueError, SyntaxError, KeyError, TypeError, MemoryError, RecursionError):
        return None
    body = (start + length, max(0, size - start - length))
    code = descr.lstrip("<>|=")
    kind, width = code[:1], code[1:]
    if kind == "U":  # UTF-32 code points: the unpacker decodes them
        return Split(binary=[body], note=f"npy {descr}", utf32=True)
    if kind in ("f", "c") or (kind in ("i", "u") and width not in ("", "1")):
        return Split(
            skipped_bytes=body[1], note=f"npy {descr}"
        )  # numbers (one-byte ints may be text)
    return Split(binary=[body], note=f"npy {descr}")


def pickle_strings(data: bytes) -> tuple[list[bytes], set[str], bool]:
    """(string and bytes constants, storage class names seen, whether the whole stream parsed)."""
    strings: list[bytes] = []
    names: set[str] = set()
    try:
        for opcode, arg, _pos in pickletools.genops(data):
            if opcode.name in _PICKLE_STRINGS and arg is not None:
                value = (
                    arg.encode("utf-8", errors="replace") if isinstance(arg, str) else bytes(arg)
                )
                strings.append(value)
                if isinstance(arg, str) and arg.endswith("Storage"):
                    names.add(arg)
            elif opcode.name == "GLOBAL" and isinstance(arg, str):
                names.add(arg.split(" ")[-1])
    except Exception:
        return strings, names, False
    return strings, names, True
