"""Stage the agent's whole write set for the contamination judge.

The write set is every file the agent created or changed anywhere it could write: on
each writable mount (:mod:`writable_roots`), the files whose ctime is at or after the
agent's clock start, whatever the directory (``wandb/``, ``.cache/``, ``/tmp``, the
home directory, ``/opt/ptb``) and whatever the name. Each is unpacked into scannable
text (:mod:`posttrainbench.task.integrity.contamination.unpack`: archives, encodings,
checkpoints, binaries) under ``DEST/text/``, smallest file first, within a read cap, a
staged-text cap and a time cap; ``DEST/MANIFEST.json`` lists every file and every cap
that cut the staging short (:mod:`write_set_manifest`).

Runs in the agent's environment as root after the agent has ended (the collect hook).
No link is followed: files are opened one path component at a time with O_NOFOLLOW.

Usage: python -P -m posttrainbench.task.integrity.write_set --dest /logs/artifacts/write_set
           [--stamp /logs/agent/ptb_start_time] [--exclude PATH ...]
           [--max-read-bytes N] [--max-staged-bytes N] [--time-s S]
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.core.nofollow import DIR_FLAGS, FILE_FLAGS, is_sparse
from posttrainbench.core.verdict import LimitHit
from posttrainbench.task.integrity.contamination.staging import TextStager
from posttrainbench.task.integrity.contamination.unpack import UnpackBudget
from posttrainbench.task.integrity.write_set_manifest import (
    MAX_LISTED,
    TEXT_DIR,
    StagedText,
    WriteSetEntry,
    WriteSetManifest,
)
from posttrainbench.task.sandbox.writable_roots import agent_clock_start, writable_mounts

GiB = 1024**3
DEFAULT_MAX_READ_BYTES = 8 * GiB
DEFAULT_MAX_STAGED_BYTES = 4 * GiB
DEFAULT_TIME_S = 900.0
MAX_FILES = 1_000_000
# Root's directories (0755) that the agent cannot write: what the collect hook and the
# verifier put there is theirs, and final_model is judged on its own.
TRUSTED_OUTPUTS = (MODEL_LAYOUT.artifacts, MODEL_LAYOUT.verifier_out)
# Kernel-provided trees: never the agent's files.
NOT_FILES = ("/proc", "/sys")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Caps:
    """The staging's caps."""

    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    max_staged_bytes: int = DEFAULT_MAX_STAGED_BYTES
    time_s: float = DEFAULT_TIME_S
    max_files: int = MAX_FILES


@dataclass(frozen=True)
class Found:
    """A file of the write set, as listed."""

    path: str
    st: os.stat_result


def list_write_set(
    roots: list[str], skip: set[str], since: float, deadline: float, max_files: int
) -> tuple[list[Found], list[LimitHit]]:
    """Files and links under *roots* with a ctime at or after *since*, never entering *skip*
    (a root inside another is walked once, as its own root)."""
    found: list[Found] = []
    stack = sorted(set(roots))
    skip = skip | set(roots)
    while stack:
        if time.monotonic() > deadline:
            return found, [
                LimitHit(
                    cap="time",
                    check="listing the write set",
                    detail=f"{len(stack)} directories not listed when the time ran out",
                )
            ]
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            path = entry.path
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if path not in skip:
                    stack.append(path)
            elif (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and st.st_ctime >= since:
                if len(found) >= max_files:
                    return found, [
                        LimitHit(
                            cap="files",
                            check="listing the write set",
                            detail=f"more than {max_files} files; the rest not listed",
                        )
                    ]
                found.append(Found(path, st))
    return found, []


def open_no_links(path: str) -> int:
    """A read fd of the regular file *path*, reached without following any link (OSError else)."""
    parts = [p for p in path.split("/") if p]
    fd = os.open("/", DIR_FLAGS)
    try:
        for name in parts[:-1]:
            below = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = below
        return os.open(parts[-1], FILE_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def _stage_one(stager: TextStager, found: Found) -> str | None:
    """Unpack one listed file into the staged text; a note when it was not scanned whole."""
    try:
        fd = open_no_links(found.path)
    except OSError as exc:
        return f"not opened: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
            found.st.st_dev,
            found.st.st_ino,
        ):
            return "replaced since it was listed"
        if is_sparse(st):
            return _stage_sparse(stager, handle, found.path)
        return stager.add_file(handle, st.st_size, found.path)


def data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each region of *fd* that holds data (holes read as zeros)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                return
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        offset = end


def _stage_sparse(stager: TextStager, handle: BinaryIO, origin: str) -> str | None:
    """Stage only a sparse file's data regions: reading its holes would cost time for
    zeros (a 1 TiB file is a few MB on disk), while data hidden between them is scanned."""
    budget = stager.budget
    fd = handle.fileno()
    with tempfile.TemporaryFile() as spool:
        for start, end in data_extents(fd, os.fstat(fd).st_size):
            handle.seek(start)
            while start < end and budget.in_time(origin):
                room = budget.max_bytes - budget.used - spool.tell()
                chunk = handle.read(min(_CHUNK, end - start, max(room, 0) + 1))
                if not chunk:
                    break
                spool.write(chunk)
                start += len(chunk)
                if room < len(chunk):  # one byte past the cap: add_file records the hit
                    break
            if budget.hit is not None or spool.tell() > budget.max_bytes - budget.used:
                break
        size = spool.tell()
        spool.seek(0)
        return stager.add_file(spool, size, f"{origin} (data regions of a sparse file)")


def stage_write_set(
    dest: Path, stamp: Path | None, exclude: list[str], caps: Caps, proc: Path = Path("/proc")
) -> WriteSetManifest:
    """List, unpack and stage the write set into *dest* (created afresh); return the manifest."""
    started = time.monotonic()
    deadline = started + caps.time_s
    since, source = agent_clock_start(stamp)
    writable, every = writable_mounts(proc / "self" / "mountinfo")
    roots = [m.point for m in writable if not m.point.startswith(NOT_FILES)]
    # Every mount point is entered only as a root of its own (and not at all if read-only).
    skip = {m.point for m in every} | {str(dest), *exclude, *NOT_FILES}
    roots = [r for r in roots if r not in {str(dest), *exclude}]
    if dest.is_symlink() or dest.exists():
        shutil.rmtree(dest) if dest.is_dir() and not dest.is_symlink() else dest.unlink()
    dest.mkdir(parents=True)
    found, incomplete = list_write_set(roots, skip, since, deadline, caps.max_files)
    stager = TextStager(
        dest / TEXT_DIR,
        UnpackBudget(max_bytes=caps.max_read_bytes, deadline=deadline),
        caps.max_staged_bytes,
    )
    entries: list[WriteSetEntry] = []
    left_out: list[Found] = []
    for item in sorted(found, key=lambda f: (f.st.st_size, f.path)):
        if stat.S_ISLNK(item.st.st_mode):
            entries.append(_entry(item, True, _link_target(item.path)))
        elif stager.budget.hit is not None:
            left_out.append(item)
        else:
            note = _stage_one(stager, item)
            entries.append(_entry(item, note is None, note=note))
    if stager.budget.hit is not None:
        cap, detail = stager.budget.hit
        incomplete.append(
            LimitHit(
                cap=cap,
                check="staging the write set",
                detail=(
                    f"{detail}; {len(left_out)} more files ({sum(f.st.st_size for f in left_out)} bytes) not scanned"
                ),
            )
        )
        entries += [_entry(f, False, note="not scanned: a cap was hit before it") for f in left_out]
    manifest = WriteSetManifest(
        since=since,
        since_source=source,
        roots=sorted(roots),
        excluded=sorted(skip & {*exclude, str(dest)}),
        n_files=len(found),
        n_bytes=sum(f.st.st_size for f in found),
        read_bytes=stager.budget.used,
        staged_bytes=stager.bytes,
        skipped_numeric_bytes=stager.budget.skipped_numeric,
        entries=entries[:MAX_LISTED],
        entries_not_listed=max(0, len(entries) - MAX_LISTED),
        texts=[StagedText(file=f, origin=o, fmt=t) for f, o, t in stager.written],
        undecoded=stager.budget.undecoded[:MAX_LISTED],
        unread=stager.budget.unread[:MAX_LISTED],
        unread_not_listed=max(0, len(stager.budget.unread) - MAX_LISTED),
        incomplete=incomplete,
        seconds=round(time.monotonic() - started, 3),
    )
    manifest.write(dest)
    return manifest


def _entry(
    found: Found, scanned: bool, link_target: str | None = None, note: str | None = None
) -> WriteSetEntry:
    kind = "symlink" if stat.S_ISLNK(found.st.st_mode) else "file"
    return WriteSetEntry(
        path=found.path,
        size=found.st.st_size,
        ctime=found.st.st_ctime,
        kind=kind,
        link_target=link_target,
        scanned=scanned if kind == "file" else False,
        note=note,
    )


def _link_target(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (the collect hook)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--stamp", type=Path, default=Path(MODEL_LAYOUT.clock))
    parser.add_argument(
        "--exclude", action="append", default=[], help="a path not to walk (repeatable)"
    )
    parser.add_argument("--max-read-bytes", type=int, default=DEFAULT_MAX_READ_BYTES)
    parser.add_argument("--max-staged-bytes", type=int, default=DEFAULT_MAX_STAGED_BYTES)
    parser.add_argument("--time-s", type=float, default=DEFAULT_TIME_S)
    args = parser.parse_args(argv)
    handoff = os.environ.get("PTB_HANDOFF_DIR")
    exclude = [*TRUSTED_OUTPUTS, *args.exclude, *([f"{handoff}/final_model"] if handoff else [])]
    caps = Caps(args.max_read_bytes, args.max_staged_bytes, args.time_s)
    manifest = stage_write_set(args.dest, args.stamp, exclude, caps)
    cut = "; ".join(f"{h.check}: {h.cap} cap ({h.detail})" for h in manifest.incomplete)
    print(
        f"write set: {manifest.n_files} files ({manifest.n_bytes} bytes) since {manifest.since:.0f} "
        f"({manifest.since_source}); staged {len(manifest.texts)} texts ({manifest.staged_bytes} bytes)"
        + (f"; INCOMPLETE: {cut}" if cut else "")
        + (
            f"; UNREAD: {len(manifest.unread) + manifest.unread_not_listed} parts"
            if manifest.unread
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
