"""Pack files: queued blobs written together, and refs that stay true after a failed write."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from posttrainbench.host.results import pack as pack_mod
from posttrainbench.host.results.pack import BlobError, PackReader, PackWriter


def test_queued_blobs_are_written_by_one_flush_and_read_back(tmp_path: Path, monkeypatch) -> None:
    calls = []
    real_writev = os.writev
    monkeypatch.setattr(
        pack_mod.os, "writev", lambda fd, bufs: calls.append(1) or real_writev(fd, bufs)
    )
    writer = PackWriter(tmp_path)
    refs = [writer.append(data) for data in (b"trace", b"", b"snapshot file", b"record")]
    assert not list(tmp_path.iterdir())  # nothing written before the flush
    writer.flush()
    writer.close()
    assert len(calls) == 1
    with PackReader(tmp_path) as reader:
        assert [reader.read(ref) for ref in refs] == [b"trace", b"", b"snapshot file", b"record"]


def test_dropped_blobs_leave_no_gap_for_the_next_ones(tmp_path: Path) -> None:
    writer = PackWriter(tmp_path)
    kept = writer.append(b"first run")
    queued = writer.append(b"second run, not written yet")
    mark = writer.mark()
    writer.append(b"a run that failed half-way")
    writer.append(b"its second file")
    writer.drop(mark)
    after = writer.append(b"next run")
    writer.close()
    assert after.offset == kept.length + queued.length
    with PackReader(tmp_path) as reader:
        assert [reader.read(ref) for ref in (kept, queued, after)] == [
            b"first run",
            b"second run, not written yet",
            b"next run",
        ]


def test_a_drop_after_a_write_forgets_only_what_is_still_queued(tmp_path: Path) -> None:
    """A run large enough to be written part-way (past FLUSH_BYTES) and then failed: the
    written part stays as garbage, the queued rest is forgotten, nothing earlier is lost."""
    writer = PackWriter(tmp_path)
    kept = writer.append(b"an earlier run")
    mark = writer.mark()
    writer.append(b"y" * pack_mod.FLUSH_BYTES)  # written at once, with the earlier run
    writer.append(b"queued after the write")
    writer.drop(mark)
    after = writer.append(b"next run")
    writer.close()
    assert after.offset == kept.length + pack_mod.FLUSH_BYTES
    with PackReader(tmp_path) as reader:
        assert reader.read(kept) == b"an earlier run" and reader.read(after) == b"next run"


def test_a_failed_write_leaves_later_refs_true(tmp_path: Path, monkeypatch) -> None:
    """A write that failed part-way (a full disk, say) left some bytes: the writer takes the
    pack's size from the file again, so the next blobs' refs point where they landed."""
    real_write = os.write

    def half_then_fail(fd, bufs):
        data = b"".join(bufs)
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    writer = PackWriter(tmp_path)
    lost = writer.append(b"x" * 1000)
    monkeypatch.setattr(pack_mod.os, "writev", half_then_fail)
    with pytest.raises(OSError):
        writer.flush()
    monkeypatch.undo()
    later = writer.append(b"the next run")
    writer.close()
    assert later.offset == 500
    with PackReader(tmp_path) as reader:
        assert reader.read(later) == b"the next run"
        with pytest.raises(BlobError):
            reader.read(lost)


def test_a_large_run_is_written_before_its_flush(tmp_path: Path) -> None:
    """Queued bytes are bounded: past FLUSH_BYTES they are written at once."""
    writer = PackWriter(tmp_path)
    big = writer.append(b"y" * pack_mod.FLUSH_BYTES)
    assert (tmp_path / writer.name).stat().st_size == pack_mod.FLUSH_BYTES
    writer.close()
    with PackReader(tmp_path) as reader:
        assert reader.read(big) == b"y" * pack_mod.FLUSH_BYTES


def test_short_writes_keep_every_blob_in_place(tmp_path: Path, monkeypatch) -> None:
    """More blobs than one writev takes, and a kernel that writes only part of each call:
    every blob still lands where its ref says."""
    real_writev = os.writev

    def short_writev(fd, bufs):
        return real_writev(fd, [bufs[0][: max(len(bufs[0]) // 2, 1)]])

    monkeypatch.setattr(pack_mod.os, "writev", short_writev)
    writer = PackWriter(tmp_path)
    blobs = [f"blob {i}".encode() for i in range(2 * pack_mod._IOV_MAX + 5)]
    refs = [writer.append(blob) for blob in blobs]
    writer.close()
    with PackReader(tmp_path) as reader:
        assert [reader.read(ref) for ref in refs] == blobs
