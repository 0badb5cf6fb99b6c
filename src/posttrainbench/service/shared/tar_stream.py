"""Candidate code travels as a tar stream: ``pack`` writes one, ``unpack`` extracts one.

``python3 -I -S tar_stream.py unpack DEST --max-bytes N --max-files N`` reads a tar on
stdin and writes it into the existing, empty directory DEST. It runs as the identity that
will use the files (a candidate's fresh uid, confined to its run directory) or as root
into a directory only root can write, so a hostile archive can at most fail. It still
refuses what a clean copy never has: absolute names, ``..``, paths through a link it
created, links leaving DEST, hard links, devices, more than N files or N bytes.
``pack DIR`` writes DIR (without a top-level ``.git``) as a tar to stdout (root, trusted
dirs only). Standard library only (Python 3.11+). Exit status: 0 done, 3 a limit was
exceeded, 4 the archive is refused; the reason is stderr's last line.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import signal
import sys
import tarfile
from typing import IO, BinaryIO

LIMIT_EXCEEDED = 3
REFUSED = 4
_CHUNK = 1 << 20


class LimitExceeded(Exception):
    """The archive is larger than the run may unpack."""


class Refused(Exception):
    """The archive holds something a clean copy never has."""


def _clean_name(name: str) -> str:
    normal = posixpath.normpath(name)
    if name.startswith("/") or normal == ".." or normal.startswith("../") or "\0" in name:
        raise Refused(f"{name!r} would be written outside the copy")
    return "" if normal == "." else normal


def unpack(stream: BinaryIO, dest: str, max_bytes: int, max_files: int) -> tuple[int, int]:
    """Extract the tar on *stream* into *dest*; return (files, bytes)."""
    links: set[str] = set()
    files = written = 0
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            name = _clean_name(member.name)
            if not name:
                continue
            files += 1
            if files > max_files:
                raise LimitExceeded(f"more than {max_files} files")
            parts = name.split("/")
            if any("/".join(parts[:i]) in links for i in range(1, len(parts) + 1)):
                raise Refused(f"{member.name!r} goes through a link of the archive")
            path = os.path.join(dest, name)
            if member.isdir():
                os.makedirs(path, mode=0o755, exist_ok=True)
            elif member.isreg():
                if written + member.size > max_bytes:
                    raise LimitExceeded(f"more than {max_bytes} bytes")
                source = archive.extractfile(member)
                if source is None:  # a regular member always has its data
                    raise Refused(f"{member.name}: no data")
                written += _write(source, path, member.mode & 0o755 | 0o600)
            elif member.issym():
                target = posixpath.normpath(
                    posixpath.join(posixpath.dirname(name), member.linkname)
                )
                if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
                    raise Refused(f"link {member.name!r} points outside the copy")
                os.makedirs(os.path.dirname(path) or dest, mode=0o755, exist_ok=True)
                os.symlink(member.linkname, path)
                links.add(name)
            else:
                raise Refused(f"{member.name!r} is not a file, directory or symbolic link")
    return files, written


def _write(source: IO[bytes], path: str, mode: int) -> int:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    copied = 0
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(_CHUNK):
            out.write(chunk)
            copied += len(chunk)
    return copied


def pack(directory: str, out: BinaryIO) -> None:
    """Write *directory*'s contents (no top-level ``.git``) to *out* as a tar; links stay links."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(os.listdir(directory)):
            if name != ".git":
                archive.add(os.path.join(directory, name), arcname=name, recursive=True)


def main(argv: list[str] | None = None) -> int:
    """``unpack DEST --max-bytes N --max-files N`` (stdin) or ``pack DIR`` (stdout)."""
    parser = argparse.ArgumentParser(prog="tar_stream.py")
    sub = parser.add_subparsers(dest="action", required=True)
    unpacking = sub.add_parser("unpack")
    unpacking.add_argument("dest")
    unpacking.add_argument("--max-bytes", type=int, required=True)
    unpacking.add_argument("--max-files", type=int, required=True)
    packing = sub.add_parser("pack")
    packing.add_argument("directory")
    args = parser.parse_args(argv)
    if args.action == "pack":
        pack(args.directory, sys.stdout.buffer)
        return 0
    signal.signal(
        signal.SIGXFSZ, signal.SIG_IGN
    )  # a file over the size limit fails with EFBIG instead
    try:
        files, size = unpack(sys.stdin.buffer, args.dest, args.max_bytes, args.max_files)
    except LimitExceeded as exc:
        print(f"the candidate's code is too large to unpack: {exc}", file=sys.stderr)
        return LIMIT_EXCEEDED
    except (Refused, tarfile.TarError) as exc:
        print(f"the candidate's code is refused: {exc}", file=sys.stderr)
        return REFUSED
    except OSError as exc:  # disk full, file size limit
        print(f"the candidate's code cannot be unpacked: {exc.strerror or exc}", file=sys.stderr)
        return LIMIT_EXCEEDED
    print(f"unpacked {files} files, {size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
