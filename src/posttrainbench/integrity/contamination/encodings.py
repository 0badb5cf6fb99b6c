"""Text hidden inside other bytes: encoded blobs in text, readable runs in binaries.

- :func:`encoded_blobs` finds base64 (standard or URL-safe, also wrapped over lines or
  ``\\n`` escapes), hex and ``\\xNN``-escaped blobs in a text, e.g. a payload kept as a
  string constant in a ``.py`` file, and decodes them.
- :func:`printable_runs` keeps the readable runs of a binary (ASCII, and UTF-16-LE as
  Windows tools write it), so strings kept in a pickle, a database page or an unknown
  format are still seen.
- :func:`as_text` says whether bytes are text, and decodes them.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

# A blob shorter than this is a hash, a key or an identifier, not a payload.
MIN_BLOB_CHARS = 64
MIN_RUN_CHARS = 20
# Text may hold a few control characters (a form feed, an escape sequence), not many.
MAX_CONTROL_SHARE = 0.01

_B64_CHARS = rb"A-Za-z0-9+/_\-"
_BASE64 = re.compile(
    rb"[" + _B64_CHARS + rb"]{24,}={0,2}(?:(?:\r?\n|\\n)[ \t]*[" + _B64_CHARS + rb"]{4,}={0,2})*"
)
_HEX = re.compile(rb"(?:[0-9a-fA-F]{2}){%d,}" % (MIN_BLOB_CHARS // 2))
_ESCAPED = re.compile(rb"(?:\\x[0-9a-fA-F]{2}){%d,}" % (MIN_BLOB_CHARS // 4))
_ASCII_RUN = re.compile(rb"[\x20-\x7e\t\r\n]{%d,}" % MIN_RUN_CHARS)
_UTF16_RUN = re.compile(rb"(?:[\x20-\x7e]\x00){%d,}" % MIN_RUN_CHARS)
_WRAP = re.compile(rb"\r?\n[ \t]*|\\n[ \t]*")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def as_text(data: bytes) -> str | None:
    """The text of *data* when it is UTF-8 (or UTF-16 with a byte-order mark) text, else None."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if text and len(_CONTROL.findall(text[: 1 << 20])) > MAX_CONTROL_SHARE * min(
        len(text), 1 << 20
    ):
        return None
    return text


def _decode_base64(blob: bytes) -> bytes | None:
    compact = _WRAP.sub(b"", blob).rstrip(b"=")
    if len(compact) < MIN_BLOB_CHARS:
        return None
    # Hex digits only is hex (handled below); a run of one letter is not a payload.
    if re.fullmatch(rb"[0-9a-fA-F]+", compact) or len(set(compact)) < 8:
        return None
    urlsafe = b"-" in compact or b"_" in compact
    compact = compact[: len(compact) - len(compact) % 4 if len(compact) % 4 == 1 else len(compact)]
    padded = compact + b"=" * (-len(compact) % 4)
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def encoded_blobs(data: bytes) -> Iterator[tuple[int, str, bytes]]:
    """(offset, encoding, decoded bytes) of each encoded blob in a text's bytes."""
    for match in _HEX.finditer(data):
        yield match.start(), "hex", bytes.fromhex(match.group().decode("ascii"))
    for match in _ESCAPED.finditer(data):
        yield (
            match.start(),
            "\\x-escapes",
            bytes.fromhex(match.group().replace(b"\\x", b"").decode("ascii")),
        )
    for match in _BASE64.finditer(data):
        decoded = _decode_base64(match.group())
        if decoded:
            yield match.start(), "base64", decoded


def printable_runs(data: bytes) -> bytes:
    """The readable runs of a binary, one paragraph each (empty when there are none)."""
    runs = [m.group().strip() for m in _ASCII_RUN.finditer(data)]
    runs += [m.group().decode("utf-16-le").encode("utf-8") for m in _UTF16_RUN.finditer(data)]
    return b"\n\n".join(r for r in runs if r)
