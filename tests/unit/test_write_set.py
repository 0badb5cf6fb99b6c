"""Staging the agent's whole write set (task/integrity/write_set.py) on real files, mounts and clocks."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

from posttrainbench.task.integrity.write_set import Caps, stage_write_set
from posttrainbench.task.integrity.write_set_manifest import TEXT_DIR, WriteSetManifest
from posttrainbench.task.sandbox.writable_roots import (
    ASSEMBLY_GAP_S,
    CLOCK_SLACK_S,
    agent_clock_start,
    parse_mountinfo,
)

QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May."
)
RECORD = json.dumps({"question": QUESTION}) + "\n"
MOUNTINFO = """\
21 1 8:1 / {root} rw,relatime shared:1 - ext4 /dev/sda1 rw
22 21 0:5 / {root}/ro ro,relatime - ext4 /dev/sdb ro
23 21 0:6 / {root}/proc rw,nosuid - proc proc rw
24 21 0:7 / {root}/shm rw,nosuid - tmpfs tmpfs rw,size=64k
25 21 0:8 / {root}/with\\040space rw - tmpfs tmpfs rw
"""
DEFAULT_CAPS = Caps()


def sandbox(tmp_path: Path) -> tuple[Path, Path]:
    """A fake machine under tmp_path/root, and its /proc (a proc, no PID 1)."""
    root = tmp_path / "root"
    for sub in ("app/wandb", "ro", "proc", "shm", "with space", "home/agent/.cache"):
        (root / sub).mkdir(parents=True)
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(MOUNTINFO.format(root=root))
    return root, proc


def stage(
    tmp_path: Path, root: Path, proc: Path, stamp: Path | None = None, caps: Caps = DEFAULT_CAPS
) -> WriteSetManifest:
    return stage_write_set(tmp_path / "out", stamp, [], caps, proc=proc)


def staged_text(tmp_path: Path, manifest: WriteSetManifest) -> dict[str, str]:
    return {t.origin: (tmp_path / "out" / TEXT_DIR / t.file).read_text() for t in manifest.texts}


def test_mountinfo_keeps_writable_file_mounts():
    mounts = parse_mountinfo(MOUNTINFO.format(root="/r"))
    assert [(m.point, m.fstype, m.writable) for m in mounts] == [
        ("/r", "ext4", True),
        ("/r/ro", "ext4", False),
        ("/r/proc", "proc", True),
        ("/r/shm", "tmpfs", True),
        ("/r/with space", "tmpfs", True),
    ]


def test_every_place_and_name_is_in_the_write_set(tmp_path):
    root, proc = sandbox(tmp_path)
    (root / "ro" / "old.jsonl").write_text(RECORD)  # on a read-only mount: not the agent's
    (root / "proc" / "x.jsonl").write_text(RECORD)  # a kernel tree
    written = {
        "app/wandb/table.jsonl": RECORD.encode(),
        "home/agent/.cache/d.jsonl.gz": gzip.compress(RECORD.encode()),
        "shm/blob.dat": RECORD.encode(),
        "with space/notes.txt": RECORD.encode(),
    }
    for rel, data in written.items():
        (root / rel).write_bytes(data)
    os.symlink("/etc/hostname", root / "app" / "link.jsonl")
    manifest = stage(tmp_path, root, proc)
    texts = staged_text(tmp_path, manifest)
    for rel in written:
        assert any(o.startswith(str(root / rel)) and QUESTION in t for o, t in texts.items()), (
            rel,
            texts,
        )
    assert not any("/ro/" in o or "/proc/" in o for o in texts)
    link = next(e for e in manifest.entries if e.path.endswith("link.jsonl"))
    assert link.kind == "symlink" and link.link_target == "/etc/hostname" and not link.scanned
    assert sorted(manifest.roots) == sorted(str(root / p) for p in ("", "shm", "with space"))
    assert not manifest.incomplete and not manifest.unread


def test_what_no_decoder_reads_is_listed_unread_in_the_manifest(tmp_path):
    # The judge reads this list (scan_inputs): it makes the contamination verdict incomplete.
    root, proc = sandbox(tmp_path)
    (root / "app" / "data.7z").write_bytes(b"7z\xbc\xaf\x27\x1c" + os.urandom(4096))
    (root / "app" / "notes.txt").write_text(RECORD)
    manifest = stage(tmp_path, root, proc)
    assert any(str(root / "app" / "data.7z") in u for u in manifest.unread), manifest.unread
    assert not any("notes.txt" in u for u in manifest.unread)


def test_files_older_than_the_clock_are_not_in_it(tmp_path):
    root, proc = sandbox(tmp_path)
    (root / "app" / "pristine.jsonl").write_text(RECORD)
    time.sleep(1.2)
    stamp = tmp_path / "ptb_start_time"
    stamp.write_text(f"{int(time.time())}\n")
    (root / "app" / "new.jsonl").write_text(
        RECORD
    )  # at once: the agent may start within the stamp's second
    manifest = stage(tmp_path, root, proc, stamp=stamp)
    assert [e.path for e in manifest.entries] == [str(root / "app" / "new.jsonl")]


@pytest.mark.parametrize("attempt", range(5))
def test_the_assembly_in_the_stamps_own_second_is_not_in_it(tmp_path, attempt):
    """Issue 36, item 7: an instance assembled in the same second as the stamp (as start.sh
    writes it: whole seconds, after ASSEMBLY_GAP_S) put all of it in the write set."""
    root, proc = sandbox(tmp_path)
    second = int(time.time())
    while time.time() - second > 0.5:  # assemble early in a second, stamp in the same one
        time.sleep(0.01)
        second = int(time.time())
    (root / "app" / "pristine.jsonl").write_text(RECORD)
    (root / "app" / "wandb" / "image.txt").write_text(RECORD)
    time.sleep(ASSEMBLY_GAP_S)
    stamp = tmp_path / "ptb_start_time"
    stamp.write_text(f"{int(time.time())}\n")
    assert int(stamp.stat().st_ctime) == second  # the case of the issue: one second for both
    (root / "app" / "new.jsonl").write_text(RECORD)
    manifest = stage(tmp_path, root, proc, stamp=stamp)
    assert [e.path for e in manifest.entries] == [str(root / "app" / "new.jsonl")]


@pytest.mark.skipif(os.geteuid() != 0, reason="the stamp is trusted only when root owns it")
def test_a_stamp_copied_back_after_the_run_keeps_its_first_second_in_it(tmp_path):
    """Where /logs/agent is not a bind mount (the local sandbox), Harbor uploads it into the
    instance again after the agent ran: the stamp is then a new file (its ctime that moment)
    with the original's mtime. What the agent wrote in the stamp's own second still counts."""
    root, proc = sandbox(tmp_path)
    second = int(time.time())
    while time.time() - second > 0.5:  # stamp early in a second, the agent at once after
        time.sleep(0.01)
        second = int(time.time())
    stamp = tmp_path / "ptb_start_time"
    stamp.write_text(f"{int(time.time())}\n")
    stamp.chmod(0o644)
    (root / "app" / "new.jsonl").write_text(RECORD)
    written = stamp.stat()
    time.sleep(max(0.0, second + 1.2 - time.time()))  # the upload comes later than that second
    stamp.unlink()  # as transfer.upload_dir: a new file, mode and mtime kept
    stamp.write_text(f"{second}\n")
    stamp.chmod(0o644)
    os.utime(stamp, ns=(written.st_atime_ns, written.st_mtime_ns))
    assert stamp.stat().st_ctime > second + 1
    manifest = stage(tmp_path, root, proc, stamp=stamp)
    assert [e.path for e in manifest.entries] == [str(root / "app" / "new.jsonl")]


@pytest.mark.skipif(os.geteuid() != 0, reason="the stamp is trusted only when root owns it")
def test_only_a_stamp_only_root_can_write_bounds_the_window(tmp_path):
    stamp = tmp_path / "ptb_start_time"
    stamp.write_text("4000000000\n")  # a far-future start: the kernel's ctime still bounds it
    stamp.chmod(0o644)
    since, source = agent_clock_start(stamp)
    assert since <= time.time() and "clock stamp" in source
    stamp.write_text("1000\n")  # an earlier one only widens the window (to its second's end)
    assert agent_clock_start(stamp)[0] == 1001 - CLOCK_SLACK_S
    stamp.chmod(0o666)  # others could have rewritten it: not trusted, every file counts
    assert agent_clock_start(stamp)[0] == 0.0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert agent_clock_start(fifo)[0] == 0.0  # a FIFO planted as the stamp never blocks
    assert time.monotonic() - started < 5
    assert agent_clock_start(tmp_path / "missing")[0] == 0.0


def test_caps_cut_the_staging_and_say_so(tmp_path):
    root, proc = sandbox(tmp_path)
    (root / "app" / "small.jsonl").write_text(RECORD)
    (root / "app" / "junk.txt").write_text("lorem ipsum dolor " * 100_000)
    manifest = stage(tmp_path, root, proc, caps=Caps(max_read_bytes=500_000))
    assert any(QUESTION in t for t in staged_text(tmp_path, manifest).values())  # smallest first
    (hit,) = manifest.incomplete
    assert hit.cap == "bytes" and hit.check == "staging the write set"
    junk = next(e for e in manifest.entries if e.path.endswith("junk.txt"))
    assert not junk.scanned and junk.note

    staged = stage(tmp_path, root, proc, caps=Caps(max_staged_bytes=len(RECORD) + 10))
    assert [h.cap for h in staged.incomplete] == ["bytes"] and "staged text" in staged.incomplete[
        0
    ].detail

    timed = stage(tmp_path, root, proc, caps=Caps(time_s=0.0))
    assert timed.incomplete and timed.incomplete[0].cap == "time"

    files = stage(tmp_path, root, proc, caps=Caps(max_files=1))
    assert any(h.cap == "files" for h in files.incomplete)


def test_excluded_paths_and_the_destination_are_not_walked(tmp_path):
    root, proc = sandbox(tmp_path)
    (root / "app" / "final_model").mkdir()
    (root / "app" / "final_model" / "config.json").write_text(RECORD)
    (root / "app" / "kept.jsonl").write_text(RECORD)
    manifest = stage_write_set(
        root / "app" / "out", None, [str(root / "app" / "final_model")], Caps(), proc=proc
    )
    paths = [e.path for e in manifest.entries]
    assert paths == [str(root / "app" / "kept.jsonl")]
    again = stage_write_set(
        root / "app" / "out", None, [], Caps(), proc=proc
    )  # replaces its own output
    assert not any("/out/" in e.path for e in again.entries)


def test_a_huge_sparse_file_is_scanned_by_its_data_only(tmp_path):
    """1 TiB of holes with a test question hidden in the middle: found, without reading the holes."""
    root, proc = sandbox(tmp_path)
    sparse = root / "app" / "blob.dat"
    with sparse.open("wb") as handle:
        handle.truncate(1 << 40)
        handle.seek(1 << 39)
        handle.write(RECORD.encode())
    manifest = stage(tmp_path, root, proc, caps=Caps(time_s=60))
    assert not manifest.incomplete
    assert manifest.read_bytes < 1 << 20  # the data region, not the terabyte of holes
    texts = staged_text(tmp_path, manifest)
    assert any(QUESTION in text for origin, text in texts.items() if "blob.dat" in origin)
