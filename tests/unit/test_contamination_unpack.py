"""Unpacking whatever an agent wrote into text the contamination scan reads (real bytes, no mocks)."""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import lzma
import os
import pickle
import random
import string
import struct
import tarfile
import zipfile
import zlib

import pytest

from posttrainbench.task.integrity.contamination.unpack import (
    MAX_DEPTH,
    UnpackBudget,
    unpack_bytes,
    unpack_file,
)

QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May."
)
RECORD = (json.dumps({"question": QUESTION, "answer": "72"}) + "\n").encode()


def found(data: bytes, budget: UnpackBudget | None = None) -> list[str]:
    """Origins of the pieces that hold the question."""
    budget = budget or UnpackBudget(max_bytes=10**8)
    return [p.origin for p in unpack_bytes(data, "f", budget) if QUESTION.encode() in p.data]


def zipped(members: dict[str, bytes], encrypt_flag: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    raw = bytearray(buf.getvalue())
    if encrypt_flag:  # mark every member encrypted (general purpose flag bit 0)
        for sig, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            at = raw.find(sig)
            while at != -1:
                raw[at + offset] |= 1
                at = raw.find(sig, at + 4)
    return bytes(raw)


def tarred(name: str, data: bytes, mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize(
    "kind,data,origin",
    [
        ("plain", RECORD, "f"),
        ("gzip", gzip.compress(RECORD), "f ▸ gzip"),
        ("bz2", bz2.compress(RECORD), "f ▸ bz2"),
        ("xz", lzma.compress(RECORD), "f ▸ xz"),
        ("zip", zipped({"a/train.jsonl": RECORD}), "f ▸ a/train.jsonl"),
        ("tar.gz", tarred("d/x.txt", RECORD, "w:gz"), "f ▸ gzip ▸ d/x.txt"),
        ("tar.xz", tarred("d/x.txt", RECORD, "w:xz"), "f ▸ xz ▸ d/x.txt"),
        (
            "base64 in .py",
            b"import base64\nDATA = '" + base64.b64encode(RECORD * 2) + b"'\n",
            "f ▸ base64@",
        ),
        ("wrapped base64", b"X = '''\n" + base64.encodebytes(RECORD * 3) + b"'''\n", "f ▸ base64@"),
        ("base64 of gzip", b"D = '" + base64.b64encode(gzip.compress(RECORD)) + b"'", "▸ gzip"),
        ("hex", b"H = '" + RECORD.hex().encode() + b"'", "f ▸ hex@"),
        (
            "\\x escapes",
            b"B = b'" + "".join(f"\\x{b:02x}" for b in RECORD).encode() + b"'",
            "f ▸ \\x-escapes@",
        ),
        ("pickle", pickle.dumps({"rows": [QUESTION, "72"]}), "f ▸ pickle strings"),
        ("binary .dat", b"\x00\x01\x02\xff" * 10 + RECORD + b"\x00\xfe" * 10, "f ▸ readable runs"),
        (
            "utf-16 in binary",
            b"\x00\xff" + QUESTION.encode("utf-16-le") + b"\xff\x00",
            "f ▸ readable runs",
        ),
        ("fake gzip magic", b"\x1f\x8b" + RECORD, "f ▸ readable runs"),
        ("fake zip magic", b"PK\x03\x04" + RECORD, "f ▸ readable runs"),
        ("fake 7z magic", b"7z\xbc\xaf\x27\x1c" + RECORD, "f ▸ readable runs"),
    ],
)
def test_test_items_are_found_whatever_the_wrapping(kind, data, origin):
    origins = found(data)
    assert origins and any(origin in o for o in origins), (kind, origins)


def test_nesting_is_bounded_and_reported():
    data = RECORD
    for _ in range(MAX_DEPTH + 2):
        data = gzip.compress(data)
    budget = UnpackBudget(max_bytes=10**8)
    assert not found(data, budget)
    assert any("nested deeper" in u for u in budget.undecoded)


def test_a_decompression_bomb_stops_at_the_byte_cap():
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # 64 MiB of zeros in ~64 KiB
    budget = UnpackBudget(max_bytes=8 * 1024 * 1024)
    list(unpack_bytes(bomb, "bomb.gz", budget))
    assert budget.hit is not None and budget.hit[0] == "bytes" and budget.used <= 8 * 1024 * 1024


def test_the_deadline_stops_unpacking():
    budget = UnpackBudget(max_bytes=10**9, deadline=0.0)
    assert not found(RECORD * 4, budget) and budget.hit is not None and budget.hit[0] == "time"


def test_an_encrypted_member_is_listed_not_dropped_silently():
    budget = UnpackBudget(max_bytes=10**8)
    assert not found(zipped({"secret.jsonl": RECORD}, encrypt_flag=True), budget)
    assert any("encrypted zip member" in u for u in budget.undecoded)


def safetensors_bytes(
    tensors: dict[str, tuple[str, bytes, list[int]]],
    metadata: dict | None = None,
    tail: bytes = b"",
) -> bytes:
    header: dict = {"__metadata__": metadata or {}}
    blobs, offset = [], 0
    for name, (dtype, blob, shape) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"".join(blobs) + tail


def test_checkpoints_give_their_text_and_skip_their_floats(tmp_path):
    floats = struct.pack("<4096f", *([0.5] * 4096))
    text = QUESTION.encode()
    plain = safetensors_bytes({"w": ("F32", floats, [4096])})
    budget = UnpackBudget(max_bytes=10**8)
    path = tmp_path / "model.safetensors"
    path.write_bytes(plain)
    with path.open("rb") as handle:
        list(unpack_file(handle, len(plain), "m", budget))
    assert budget.skipped_numeric == len(floats) and budget.used < 1000  # the header only

    in_metadata = safetensors_bytes({"w": ("F32", floats, [4096])}, metadata={"note": QUESTION})
    assert found(in_metadata)
    in_bytes = safetensors_bytes({"w": ("F32", floats, [4096]), "t": ("U8", text, [len(text)])})
    assert any("byte array" in o for o in found(in_bytes))
    # A tail no tensor accounts for: the header is not trusted, every byte is scanned.
    assert any(
        "readable runs" in o
        for o in found(safetensors_bytes({"w": ("F32", floats, [4096])}, tail=RECORD))
    )


def _pack_like(objects: list[bytes]) -> bytes:
    """A git-pack-like file: a header, then each object as a few header bytes and a zlib stream."""
    out = b"PACK\x00\x00\x00\x02" + struct.pack(">I", len(objects))
    for i, obj in enumerate(objects):
        out += bytes([0xB0 | (i % 16), 0x40 + (len(obj) % 64)]) + zlib.compress(obj, 9)
    return out


def test_a_small_stream_first_does_not_hide_the_streams_after_it():
    # A stream that ended within the decoder's first bounded step was taken to run to
    # the file's end: every stream after it was skipped, and its bytes counted as covered.
    # The file must outgrow that first step (4 KiB): prose of random words.
    rng = random.Random(7)
    filler = " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
        for _ in range(3000)
    ).encode()
    data = _pack_like([b"tiny object, read first " * 3, RECORD * 3, filler])
    budget = UnpackBudget(max_bytes=10**8)
    assert any("zlib@" in o for o in found(data, budget)), budget.undecoded
    assert not budget.unread


def test_a_pack_of_many_small_streams_is_read_whole_and_not_unread():
    # Honest git packs: objects of a few hundred bytes, each a stream behind its own
    # header, so no one stream covers a whole entropy window; together they do.
    objects = [
        (f"def f{i}(x):\n    return x * {i} + {i * i}  # {os.urandom(40).hex()}\n" * 3).encode()
        for i in range(60)
    ]
    budget = UnpackBudget(max_bytes=10**8)
    pieces = list(unpack_bytes(_pack_like(objects), "pack", budget))
    assert sum(p.data.count(b"def f") for p in pieces) >= 60 * 3
    assert not budget.unread, budget.unread[:3]


def _elf(body: bytes) -> bytes:
    """A 64-bit little-endian executable's ELF header, then *body*."""
    header = b"\x7fELF\x02\x01\x01" + b"\x00" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 2, 0x3E, 1, 0, 64, 0, 0, 64, 56, 0, 64, 0, 0)
    return header + body


def test_a_zstd_signature_in_native_code_is_not_unread_but_one_elsewhere_is():
    # Compilers keep compressed debug sections in native code (a Go binary in a wheel);
    # native code is opaque (unpack.OPAQUE), but the same bytes in a data file are unread.
    frame = b"\x28\xb5\x2f\xfd" + os.urandom(64)
    elf = _elf(b"code " * 40 + frame + b"\x00" * 64)
    native = UnpackBudget(max_bytes=10**8)
    list(unpack_bytes(elf, "bin/tool", native))
    assert not native.unread, native.unread
    data = UnpackBudget(max_bytes=10**8)
    list(unpack_bytes(b"header " * 40 + frame, "blob.dat", data))
    assert any("zstd" in u for u in data.unread), data.unread


def test_a_blob_among_native_codes_strings_is_as_opaque_as_the_code():
    # Go binaries and embedded tool binaries keep base64 tables and certificates among
    # their strings; decoded, they are high-entropy bytes. In a text file they are unread.
    blob = base64.b64encode(os.urandom(3000))
    elf = _elf(b"\x01\x02" * 30 + blob + b"\x00" * 64)
    native = UnpackBudget(max_bytes=10**8)
    list(unpack_bytes(elf, "bin/tool", native))
    assert not native.unread, native.unread
    text = UnpackBudget(max_bytes=10**8)
    list(unpack_bytes(b"key = " + blob + b"\n", "notes.txt", text))
    assert any("base64" in u for u in text.unread), text.unread


@pytest.mark.parametrize(
    "prefix",
    [
        b"MZ",
        b"\x7fELF",
        b"\x7fELF\x02\x01\x01" + b"\x00" * 57,
        b"\xca\xfe\xba\xbe\x00\x00\x00\x34",  # a Java class file's magic and version
        b"\xcf\xfa\xed\xfe\x99\x00\x00\x00",  # a Mach-O magic with no CPU type
    ],
)
def test_a_native_magic_alone_does_not_make_a_blob_opaque(prefix):
    # The exemption is for native code by its header; two bytes of "MZ" in front of a
    # 7z archive or random bytes must not hide them from the unread list.
    blob = b"7z\xbc\xaf\x27\x1c" + os.urandom(4096)
    budget = UnpackBudget(max_bytes=10**8)
    list(unpack_bytes(prefix + b"\x00" * 8 + blob, "tool.bin", budget))
    assert budget.unread, prefix
