"""Text hidden inside other bytes: encoded blobs in text, readable runs in binaries.

- :func:`encoded_blobs` finds base64 (standard or URL-safe, also wrapped over lines or
  ``\\n`` escapes), base32, base85 (Python's and Adobe's ``<~...~>`` ascii85), hex and
  ``\\xNN``-escaped blobs in a text, e.g. a payload kept as a string constant in a
  ``.py`` file, and decodes them.
- :func:`printable_runs` keeps the readable runs of a binary (ASCII, UTF-16 and UTF-32,
  either byte order, with or without a byte-order mark), so strings kept in a pickle, a
  database page or an unknown format are still seen.
- :func:`as_text` says whether bytes are text (UTF-8, or UTF-16/32 with a byte-order
  mark), and decodes them.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator

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
# Wide text without a byte-order mark: ASCII characters padded with zero bytes.
_WIDE_RUNS = {
    "utf-16-le": re.compile(rb"(?:[\x20-\x7e\t\r\n]\x00){%d,}" % MIN_RUN_CHARS),
    "utf-16-be": re.compile(rb"(?:\x00[\x20-\x7e\t\r\n]){%d,}" % MIN_RUN_CHARS),
    "utf-32-le": re.compile(rb"(?:[\x20-\x7e\t\r\n]\x00\x00\x00){%d,}" % MIN_RUN_CHARS),
    "utf-32-be": re.compile(rb"(?:\x00\x00\x00[\x20-\x7e\t\r\n]){%d,}" % MIN_RUN_CHARS),
}
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_BASE32 = re.compile(rb"[A-Z2-7]{%d,}={0,6}" % MIN_BLOB_CHARS)
# Python's base85 alphabet (base64.b85encode); runs of it without spaces.
_BASE85 = re.compile(rb"[0-9A-Za-z!#$%%&()*+\-;<=>?@^_`{|}~]{%d,}" % MIN_BLOB_CHARS)
_ASCII85 = re.compile(rb"<~[!-uz\s]{%d,}?~>" % MIN_BLOB_CHARS)
_WRAP = re.compile(rb"\r?\n[ \t]*|\\n[ \t]*")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def as_text(data: bytes) -> str | None:
    """The text of *data* when it is UTF-8 (or UTF-16 with a byte-order mark) text, else None."""
    bom = next((codec for mark, codec in _BOMS if data.startswith(mark)), None)
    if bom is not None:
        try:
            text = data.decode(bom)
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


def text_bytes(data: bytes) -> bytes | None:
    """*data* as UTF-8 when it is text (see :func:`as_text`), else None."""
    text = as_text(data)
    if text is None:
        return None
    if any(data.startswith(mark) for mark, _codec in _BOMS):
        return text.encode("utf-8", "surrogatepass")
    return data


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
        if _BASE32.fullmatch(match.group()):
            continue  # base32's alphabet is base64's too: decoded as base32 below
        decoded = _decode_base64(match.group())
        if decoded:
            yield match.start(), "base64", decoded
    for match in _BASE32.finditer(data):
        decoded = _decode(base64.b32decode, match.group())
        if decoded:
            yield match.start(), "base32", decoded
    for match in _ASCII85.finditer(data):
        decoded = _decode(lambda b: base64.a85decode(b, adobe=True), match.group())
        if decoded:
            yield match.start(), "ascii85", decoded
    for match in _BASE85.finditer(data):
        blob = match.group()
        # Code and prose are not base85 runs this long; a base64 blob would be (a subset).
        if _BASE64.fullmatch(blob) or _BASE32.fullmatch(blob) or len(set(blob)) < 16:
            continue
        decoded = _decode(base64.b85decode, blob)
        if decoded:
            yield match.start(), "base85", decoded


def _decode(decoder: Callable[[bytes], bytes], blob: bytes) -> bytes | None:
    try:
        return decoder(blob)
    except (binascii.Error, ValueError):
        return None


def printable_runs(data: bytes) -> bytes:
    """The readable runs of a binary, one paragraph each (empty when there are none)."""
    runs = [m.group().strip() for m in _ASCII_RUN.finditer(data)]
    for codec, pattern in _WIDE_RUNS.items():
        runs += [m.group().decode(codec).encode("utf-8") for m in pattern.finditer(data)]
    # One text read in two widths (UTF-32-BE is UTF-32-LE three bytes on) is kept once.
    return b"\n\n".join(r for r in dict.fromkeys(runs) if r)
