"""Pack files of a results store: a run's record and copied files, appended as blobs.

Creating a directory or a small file cost ~250-310 us on the disks measured, appending
to an open file ~3 us; a store of thousands of runs written as one directory and 3-5
files each spent most of an export's time there. So each export worker appends to one
pack of its own (`packs/<random>.pack`, created on its first blob, never rewritten), and
a run is a `BlobRef` (pack, offset, length, CRC-32) to its record, whose own refs name
its files. A blob becomes part of the store only when the parent writes its record's
ref into the store's journal; a killed worker leaves bytes nobody refers to, never a
half run. The CRC catches a torn or damaged blob (a crash before the page cache reached
the disk); the exporter is the store's only writer, so it guards against accidents, not
against someone who can write the store anyway.
"""

from __future__ import annotations

import os
import uuid
import zlib
from pathlib import Path
from typing import Annotated, NamedTuple

from pydantic import Field

PACKS_DIR = "packs"
PACK_SUFFIX = ".pack"
FLUSH_BYTES = 4 * 2**20  # queued past this, blobs are written without waiting for flush
_IOV_MAX = 1024  # buffers one writev takes (Linux)
_NEW_PACK = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


class BlobError(OSError):
    """A blob that cannot be read back as it was written (missing pack, short, damaged)."""


class BlobRef(NamedTuple):
    """Where one blob lies: a pack of the store's `packs/`, its offset, length and CRC-32.

    A tuple (a JSON array where a record or the journal holds it), validated as a field
    of those models: an export makes one per stored file, and a pydantic model cost ~11
    us apiece to build even unvalidated.
    """

    # Only names a writer makes: a damaged journal can never point outside packs/.
    pack: Annotated[str, Field(pattern=r"^[0-9a-f]{32}\.pack$")]
    offset: Annotated[int, Field(ge=0)]
    length: Annotated[int, Field(ge=0)]
    crc32: Annotated[int, Field(ge=0)]


class PackWriter:
    """Appends blobs to one new pack under *packs_dir* (created on the first write).

    Blobs are queued and written together by `flush` (a run's few blobs in one system
    call, not one each), or as soon as FLUSH_BYTES are queued.
    """

    def __init__(self, packs_dir: Path):
        self.packs_dir = Path(packs_dir)
        self.name = uuid.uuid4().hex + PACK_SUFFIX
        self._fd: int | None = None
        self._size = 0  # written
        self._queued: list[bytes] = []
        self._queued_size = 0
        self._flushes = 0  # writes so far: a mark taken before the last one is all written

    def append(self, data: bytes) -> BlobRef:
        """Queue *data* for the pack's end; its ref (valid once flushed)."""
        offset = self._size + self._queued_size
        self._queued.append(data)
        self._queued_size += len(data)
        if self._queued_size >= FLUSH_BYTES:
            self.flush()
        return BlobRef(self.name, offset, len(data), zlib.crc32(data))

    def flush(self) -> None:
        """Write what is queued. On a failure the pack's size is taken again from the file:
        what did get written is garbage no ref names, and later blobs still land where their
        refs say."""
        if not self._queued:
            return
        self._flushes += 1
        if self._fd is None:
            self._fd = os.open(self.packs_dir / self.name, _NEW_PACK, 0o644)
        queued, size = self._queued, self._queued_size
        self._queued, self._queued_size = [], 0
        try:
            for start in range(0, len(queued), _IOV_MAX):
                batch = queued[start : start + _IOV_MAX]
                written = os.writev(self._fd, batch)
                if written < sum(map(len, batch)):  # a short write: this batch's rest first
                    view = memoryview(b"".join(batch))[written:]
                    while view:
                        view = view[os.write(self._fd, view) :]
        except OSError:
            self._size = os.fstat(self._fd).st_size
            raise
        self._size += size

    def mark(self) -> tuple[int, int]:
        """Where the queue ends now, for `drop`."""
        return self._flushes, len(self._queued)

    def drop(self, mark: tuple[int, int]) -> None:
        """Forget the blobs queued since *mark* (a run that failed half-way: its refs are
        never used); any of them already written are garbage no ref names."""
        flushes, queued = mark
        keep = queued if flushes == self._flushes else 0  # written since: the rest is its
        self._queued_size -= sum(map(len, self._queued[keep:]))
        del self._queued[keep:]

    def close(self) -> None:
        """Write what is queued and close the pack (an export closes its writers once, at
        its end)."""
        try:
            self.flush()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class PackReader:
    """Reads blobs of one store's packs, keeping each pack open once it was read."""

    def __init__(self, packs_dir: Path):
        self.packs_dir = Path(packs_dir)
        self._fds: dict[str, int] = {}

    def read(self, ref: BlobRef) -> bytes:
        """The blob's bytes; BlobError when the pack is missing, short or the CRC differs."""
        fd = self._fds.get(ref.pack)
        if fd is None:
            try:
                fd = os.open(self.packs_dir / ref.pack, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError as exc:
                raise BlobError(f"pack {ref.pack}: {exc.strerror or exc}") from None
            self._fds[ref.pack] = fd
        data = os.pread(fd, ref.length, ref.offset)
        if len(data) != ref.length or zlib.crc32(data) != ref.crc32:
            raise BlobError(f"pack {ref.pack}: the blob at {ref.offset} is short or damaged")
        return data

    def close(self) -> None:
        """Close every pack opened."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> PackReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
