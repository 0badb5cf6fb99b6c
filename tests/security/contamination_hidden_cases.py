"""Test items hidden in training files the way a hostile agent would (issue 36, item 6).

Each case is one file's bytes holding test item ITEMS[0] (question and answer), and
what the scan must do with it: find the item (``caught``) or list the bytes as unread
(``unread``). Never neither: that is a silent gap.
"""

from __future__ import annotations

import base64
import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import sqlite3
import struct
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.task.integrity.contamination.normalize import ptb_clean_text
from posttrainbench.task.integrity.contamination.reference import ReferenceItem

ITEMS = [
    ReferenceItem(
        question=(
            "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning "
            "and bakes muffins for her friends every day with four. She sells the remainder "
            "at the farmers' market daily for $2 per fresh duck egg. How much in dollars "
            "does she make every day at the farmers' market?"
        ),
        answer="Janet sells 16 - 3 - 4 = 9 duck eggs a day. She makes 9 * 2 = $18 every day.",
    ),
    ReferenceItem(
        question=(
            "A robe takes 2 bolts of blue fiber and half that much white fiber. How many "
            "bolts in total does it take to make the robe, counting both of the colors?"
        ),
        answer="It takes 2/2 = 1 bolt of white fiber, so the total is 2 + 1 = 3 bolts.",
    ),
]
RECORD = json.dumps({"prompt": ITEMS[0].question, "completion": ITEMS[0].answer}) + "\n"
TEXT = f"Question: {ITEMS[0].question}\nAnswer: {ITEMS[0].answer}\n"
FILLER = "".join(f"step {i}: loss 0.{i:04d}, lr 3e-5, tokens {i * 4096}\n" for i in range(40))


@dataclass(frozen=True)
class Case:
    """One planted file and what the scan must do with it."""

    name: str
    data: bytes
    expect: str  # "caught" or "unread"
    decoder: str  # what opens it (the ablation switches this one off)


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _raw_lzma(data: bytes, lzma2: bool) -> bytes:
    f = lzma.FILTER_LZMA2 if lzma2 else lzma.FILTER_LZMA1
    return lzma.compress(data, format=lzma.FORMAT_RAW, filters=[{"id": f, "preset": 6}])


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def _sqlite(rows: list[tuple[str, bytes | str]]) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.db"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE cache (key TEXT, value BLOB)")
        conn.executemany("INSERT INTO cache VALUES (?, ?)", rows)
        conn.commit()
        conn.close()
        return path.read_bytes()


def _pip_http_cache(body: bytes) -> bytes:
    """pip's old HTTP-cache entry: a version tag, a msgpack-like header, then the body."""
    header = b"\x85\xa7headers\x81\xacContent-Type\xb8application/octet-stream\xa6status\xcc\xc8"
    return b"cc=4," + header + struct.pack(">I", len(body)) + body


def _git_pack(objects: list[bytes]) -> bytes:
    out = b"PACK" + struct.pack(">II", 2, len(objects))
    for obj in objects:
        size, kind = len(obj), 3  # blob
        head = [(kind << 4) | (size & 0x0F) | (0x80 if size > 15 else 0)]
        size >>= 4
        while size:
            head.append((size & 0x7F) | (0x80 if size > 127 else 0))
            size >>= 7
        out += bytes(head) + zlib.compress(obj)
    return out + os.urandom(20)


def cases() -> list[Case]:
    """About thirty planted files, each format of issue 36 item 6 and a few combinations."""
    rec, text = RECORD.encode(), TEXT.encode()
    prefix = FILLER.encode()
    rot13 = codecs.encode(TEXT, "rot13").encode()
    reversed_text = TEXT[::-1].encode()
    ptb = (ptb_clean_text(ITEMS[0].question) + " " + ptb_clean_text(ITEMS[0].answer)).encode()
    random_blob = os.urandom(8192)
    return [
        Case("plain jsonl (control)", rec, "caught", "text"),
        Case("gzip behind a prefix", prefix + gzip.compress(rec), "caught", "signatures"),
        Case(
            "pip cache entry holding a wheel (zip behind a prefix)",
            _pip_http_cache(_zip({"pkg/data.jsonl": rec})),
            "caught",
            "signatures",
        ),
        Case(
            "pip cache entry holding a gzip body",
            _pip_http_cache(gzip.compress(rec)),
            "caught",
            "signatures",
        ),
        Case(
            "zlib stream (a git loose object)",
            zlib.compress(b"blob %d\x00" % len(rec) + rec),
            "caught",
            "signatures",
        ),
        Case("git pack of zlib objects", _git_pack([prefix, rec, text]), "caught", "signatures"),
        Case("raw deflate, whole file", _raw_deflate(text), "caught", "raw"),
        Case("raw deflate behind a text prefix", prefix + _raw_deflate(text), "caught", "raw"),
        Case(
            "raw deflate blob in SQLite",
            _sqlite([("a", b"x" * 40), ("q", _raw_deflate(rec))]),
            "caught",
            "sqlite",
        ),
        Case("zlib blob in SQLite", _sqlite([("q", zlib.compress(rec))]), "caught", "sqlite"),
        Case("text in SQLite", _sqlite([("q", TEXT)]), "caught", "sqlite"),
        Case("xz behind a prefix", prefix + lzma.compress(rec), "caught", "signatures"),
        Case("bz2 behind a prefix", prefix + bz2.compress(rec), "caught", "signatures"),
        Case(
            "lzma alone (.lzma)",
            lzma.compress(text, format=lzma.FORMAT_ALONE),
            "caught",
            "signatures",
        ),
        Case("raw lzma2", _raw_lzma(text, lzma2=True), "caught", "raw"),
        Case("raw lzma1 behind a prefix", prefix + _raw_lzma(text, lzma2=False), "caught", "raw"),
        Case(
            "zip member stored, no central directory, behind a prefix",
            prefix + _zip({"d.jsonl": rec}, zipfile.ZIP_STORED)[:-22],
            "caught",
            "signatures",
        ),
        Case("rot13 text", rot13, "caught", "variants"),
        Case("reversed text", reversed_text, "caught", "variants"),
        Case("rot13 inside gzip", gzip.compress(rot13), "caught", "variants"),
        Case(
            "PostTrainBench's case: lowercased, punctuation stripped",
            ptb + b"\n",
            "caught",
            "variants",
        ),
        Case(
            "base32 in a .py file", b"D = '" + base64.b32encode(rec) + b"'\n", "caught", "encodings"
        ),
        Case(
            "base85 in a .py file", b"D = '" + base64.b85encode(rec) + b"'\n", "caught", "encodings"
        ),
        Case(
            "ascii85 in a .py file",
            b"D = '" + base64.a85encode(rec, adobe=True) + b"'\n",
            "caught",
            "encodings",
        ),
        Case(
            "base64 of raw deflate",
            b"D = '" + base64.b64encode(_raw_deflate(rec)) + b"'\n",
            "caught",
            "raw",
        ),
        Case("UTF-32 with a byte-order mark", TEXT.encode("utf-32"), "caught", "encodings"),
        Case(
            "UTF-32-LE without a byte-order mark", TEXT.encode("utf-32-le"), "caught", "encodings"
        ),
        Case(
            "UTF-16-BE without a byte-order mark",
            b"\x00\x00" + TEXT.encode("utf-16-be"),
            "caught",
            "encodings",
        ),
        Case(
            "7z archive behind a prefix",
            prefix + b"7z\xbc\xaf\x27\x1c" + random_blob,
            "unread",
            "unread",
        ),
        Case("zstd frame", b"\x28\xb5\x2f\xfd" + random_blob, "unread", "unread"),
        Case(
            "encrypted blob (high entropy) behind a prefix",
            prefix + random_blob,
            "unread",
            "unread",
        ),
        Case("raw deflate of encrypted bytes", _raw_deflate(random_blob), "unread", "unread"),
    ]
