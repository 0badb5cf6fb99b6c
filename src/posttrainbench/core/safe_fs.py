"""Reading and copying whole trees an untrusted party wrote (trial directories), built
on the no-follow primitives of `posttrainbench.core.nofollow`.

An agent writes a trial's `agent/`, `artifacts/` and (in a shared environment) `verifier/`,
and programs it left running may keep writing there while host code reads. So host code
opens every path below a trusted root one component at a time, each relative to the
directory fd above it, with O_NOFOLLOW: a symbolic link anywhere below the root is refused,
never followed, and so is a path swapped for a link between a check and the open.

Only directories and regular files are opened. A FIFO, socket or device is refused from its
lstat, before an open that could block or act (opens also use O_NONBLOCK, in case one was
swapped in since). A file with more than one hard link may be a host file's other name and
is refused unless the caller trusts whoever wrote the tree. A file that is almost all holes
is refused (reading it is gigabytes of zeros), and every read and copy is capped. A file in
such a directory is rewritten only by `replace_at`: a new file renamed over the old name,
both relative to the directory's fd. A file read whole (`read_file`) can be stored from the
bytes read (`write_read`): a copy that never opens the source a second time, so an agent
swapping it in between changes nothing.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from posttrainbench.core.nofollow import (
    DIR_FLAGS,
    NEW_FILE_FLAGS,
    Refused,
    copy_fd,
    open_dir_at,
    open_file_at,
    read_fd,
    split_relative,
)

MAX_DEPTH = 64  # directory nesting a copy follows
MAX_REFUSALS_KEPT = 100  # refusal lines a copy keeps; the rest are counted
MAX_CACHED_DIRS = 64  # directory fds a SafeDir keeps open for reuse


@functools.lru_cache(maxsize=1024)
def _split(relative: str) -> tuple[str, ...]:
    """`split_relative`, remembered: an export reads the same names (`verifier/metrics.json`,
    `agent`, ...) in every trial. A tuple, so that no caller can change what is cached."""
    return tuple(split_relative(relative))


class CopySink(Protocol):
    """Where a copy writes: a directory (`DirSink`) or, say, memory for a results store.
    *relative* names are the copy's own ("/"-separated, checked by the reader side)."""

    def make_dir(self, relative: str) -> None:
        """A new, empty directory."""

    def put(self, relative: str, data: bytes, st: os.stat_result | None = None) -> None:
        """A new file holding *data* (*st*: the source's stat, for its mode and mtime)."""

    def copy_from(self, relative: str, fd: int, st: os.stat_result) -> int:
        """A new file with what *fd* holds, up to its size when opened; bytes copied."""
        ...


class DirSink:
    """Copies into a directory the caller made: every directory and file is created new
    relative to its parent's fd (O_NOFOLLOW, O_EXCL), with the source's mode bits and mtime."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fds: dict[str, int] = {}

    def _dir_fd(self, relative: str) -> int:
        """The fd of a directory below the sink's root, opened one component at a time
        (no link followed) and kept; at most MAX_CACHED_DIRS are kept, so a tree of
        countless directories cannot run the process out of fds."""
        fd = self._fds.get(relative)
        if fd is not None:
            return fd
        if not relative:
            fd = os.open(self.path, DIR_FLAGS)
        else:
            parent, _, name = relative.rpartition("/")
            fd = os.open(name, DIR_FLAGS, dir_fd=self._dir_fd(parent))
        if len(self._fds) >= MAX_CACHED_DIRS:
            oldest = next(k for k in self._fds if k)  # the root stays
            os.close(self._fds.pop(oldest))
        self._fds[relative] = fd
        return fd

    def _parent(self, relative: str) -> tuple[int, str]:
        parent, _, name = relative.rpartition("/")
        return self._dir_fd(parent), name

    def make_dir(self, relative: str) -> None:
        """A new directory."""
        parent, name = self._parent(relative)
        os.mkdir(name, 0o755, dir_fd=parent)

    def _create(self, relative: str, st: os.stat_result | None) -> int:
        parent, name = self._parent(relative)
        mode = 0o755 if st is not None and st.st_mode & 0o111 else 0o644
        return os.open(name, NEW_FILE_FLAGS, mode, dir_fd=parent)

    def put(self, relative: str, data: bytes, st: os.stat_result | None = None) -> None:
        """A new file holding *data*."""
        dst = self._create(relative, st)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view) :]
            if st is not None:
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)

    def copy_from(self, relative: str, fd: int, st: os.stat_result) -> int:
        """A new file with *fd*'s bytes (in the kernel: sendfile)."""
        dst = self._create(relative, st)
        try:
            copied = copy_fd(fd, dst, st.st_size)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
        return copied

    def close(self) -> None:
        """Close the directory fds it opened."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> DirSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def _sink_of(dest: Path | CopySink) -> Iterator[CopySink]:
    """*dest* as a sink: a path is a `DirSink`, closed after the copy."""
    if not isinstance(dest, Path):
        yield dest
        return
    with DirSink(dest) as sink:
        yield sink


@dataclass
class CopyBudget:
    """What a copy may still write, and every entry it refused, with why."""

    max_bytes: int
    max_files: int
    max_file_bytes: int | None = None
    bytes: int = 0
    files: int = 0
    refused: list[str] = field(default_factory=list)
    refused_more: int = 0

    def refuse(self, exc: Refused) -> None:
        """Keep a refusal line (counting, not keeping, those past MAX_REFUSALS_KEPT)."""
        if len(self.refused) < MAX_REFUSALS_KEPT:
            self.refused.append(str(exc))
        else:
            self.refused_more += 1

    def refusal_lines(self) -> list[str]:
        """The refusal lines, with one more line for those only counted."""
        more = [f"... and {self.refused_more} more refused"] if self.refused_more else []
        return self.refused + more

    def admits(self, shown: str, size: int) -> bool:
        """Whether a file of *size* bytes fits the per-file and total caps (False: refused
        and noted). The file-count cap is checked by the caller, which stops there."""
        if self.max_file_bytes is not None and size > self.max_file_bytes:
            self.refuse(
                Refused(shown, f"{size} bytes: over the cap of {self.max_file_bytes} bytes a file")
            )
            return False
        if self.bytes + size > self.max_bytes:
            self.refuse(
                Refused(shown, f"{size} bytes: over the copy cap of {self.max_bytes} bytes")
            )
            return False
        return True


@dataclass(frozen=True)
class FileRead:
    """What `SafeDir.read_file` read: the file's path below the root, its first bytes, whether
    there was more, and the fstat of the file that was opened (after the link and kind checks)."""

    shown: str
    data: bytes
    more: bool
    st: os.stat_result

    @property
    def whole(self) -> bytes | None:
        """The file as it was when opened (its size then; a file that grew since is cut there,
        as a copy would), or None when the read stopped at its limit."""
        if self.more or len(self.data) < self.st.st_size:
            return None
        return self.data[: self.st.st_size]


def write_read(read: FileRead, dest: Path | CopySink, name: str, budget: CopyBudget) -> bool:
    """Store a file already read whole as *name* in *dest* (a directory the caller made, or
    a sink), within *budget*, as `SafeDir.copy_file` would have copied it (same caps, mode
    and mtime), without opening the source again: the stored bytes are the ones that were
    read and checked. False, with the reason in `budget.refused`, when it does not fit."""
    data = read.whole
    if data is None:
        raise ValueError(f"{read.shown}: not read whole")
    if budget.files >= budget.max_files:
        budget.refuse(
            Refused(
                read.shown, f"over the cap of {budget.max_files} files: it and the rest not copied"
            )
        )
        return False
    if not budget.admits(read.shown, len(data)):
        return False
    with _sink_of(dest) as sink:
        sink.put(name, data, read.st)
    budget.bytes += len(data)
    budget.files += 1
    return True


class _FilesCapReached(Exception):
    """Stops a tree copy at its file-count cap."""


class SafeDir:
    """A trusted directory opened once; every path below it is opened fd-relative, never via a link.

    *hard_links_ok*: the tree's writer is trusted not to plant hard links (a results store
    the exporter wrote); otherwise a file with several names is refused.
    """

    def __init__(self, fd: int, path: Path, *, hard_links_ok: bool = False):
        self.fd = fd
        self.path = Path(path)
        self.hard_links_ok = hard_links_ok
        # Directories already reached without a link. A cached fd keeps naming the directory
        # it was opened on even if the agent later swaps its name for a link, so reusing it
        # is as safe as the first walk, and saves a path walk per file.
        self._dirs: dict[tuple[str, ...], int] = {}

    @classmethod
    def open(cls, path: Path | str, *, hard_links_ok: bool = False) -> SafeDir:
        """Open the root itself as the caller named it: the root is trusted, what is below it is not.

        *path* may be a string: opening a Path built from one formats it again (~3 us)."""
        return cls(
            os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC),
            Path(path),
            hard_links_ok=hard_links_ok,
        )

    def close(self) -> None:
        """Close the root's fd and those of the directories below it."""
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _walk(self, parts: Sequence[str]) -> int:
        """A new fd of the directory *parts* name below the root (the caller closes it)."""
        fd, owned = self._borrow(parts)
        return fd if owned else os.dup(fd)

    def _borrow(self, parts: Sequence[str]) -> tuple[int, bool]:
        """(fd, whether the caller owns it): a cached fd is lent, a fresh one past the cache is given."""
        key = tuple(parts)
        if not key:
            return self.fd, False
        if key in self._dirs:
            return self._dirs[key], False
        start = next((i for i in range(len(key) - 1, 0, -1) if key[:i] in self._dirs), 0)
        fd, owned = (self._dirs[key[:start]] if start else self.fd), False
        for i in range(start, len(parts)):
            try:
                below = open_dir_at(fd, parts[i], "/".join(parts[: i + 1]))
            finally:
                if owned:
                    os.close(fd)
            fd, owned = below, True
            if len(self._dirs) < MAX_CACHED_DIRS:
                self._dirs[key[: i + 1]], owned = fd, False
        return fd, owned

    def subdir(self, relative: str) -> SafeDir:
        """The directory *relative* names, as a SafeDir of its own (Refused if any part is a link)."""
        return SafeDir(
            self._walk(split_relative(relative)),
            self.path / relative,
            hard_links_ok=self.hard_links_ok,
        )

    def lstat(self, relative: str) -> os.stat_result | None:
        """The entry's own stat; None when it does not exist without following a link."""
        parts = _split(relative)
        if not parts:
            return os.fstat(self.fd)
        try:
            # _borrow and try/finally, not a @contextmanager: a generator per call costs
            # about as much as the lstat itself, and an export calls this ~10 times a trial.
            parent, owned = self._borrow(parts[:-1])
            try:
                return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            finally:
                if owned:
                    os.close(parent)
        except (FileNotFoundError, NotADirectoryError, Refused):
            return None

    def is_dir(self, relative: str) -> bool:
        """Whether *relative* is a real directory (a link to one is not)."""
        st = self.lstat(relative)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def entries(
        self, relative: str = "", wanted: Callable[[str], bool] | None = None
    ) -> list[tuple[str, os.stat_result]]:
        """(name, lstat) of each entry of a directory below the root, sorted by name.

        *wanted*: only the names it accepts are lstat'ed and returned (a directory an agent
        filled with countless other files then costs a listing, not a stat apiece).
        """
        found = []
        fd, owned = self._borrow(_split(relative))
        try:
            with os.scandir(fd) as listing:
                for entry in listing:
                    if wanted is not None and not wanted(entry.name):
                        continue
                    try:
                        found.append((entry.name, entry.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        continue
        finally:
            if owned:
                os.close(fd)
        return sorted(found, key=lambda item: item[0])

    def names(self, relative: str = "") -> list[str]:
        """The names in a directory below the root, sorted: `entries` without an lstat each,
        for a caller that opens (and so checks) only the few it wants."""
        fd, owned = self._borrow(_split(relative))
        try:
            return sorted(os.listdir(fd))
        finally:
            if owned:
                os.close(fd)

    def open_file(
        self, relative: str, *, hard_links_ok: bool | None = None
    ) -> tuple[int, os.stat_result]:
        """An fd of the regular file *relative* names, and its fstat (the caller closes the fd).

        *hard_links_ok* overrides the directory's rule for one file the caller knows only
        trusted code wrote.
        """
        return self._open_parts(_split(relative), hard_links_ok, None)

    def _open_parts(
        self, parts: Sequence[str], hard_links_ok: bool | None, lstat: os.stat_result | None
    ) -> tuple[int, os.stat_result]:
        """`open_file` of split *parts*, with the *lstat* of `read_file`."""
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "a directory", str(self.path))
        shown = "/".join(parts)
        linked = self.hard_links_ok if hard_links_ok is None else hard_links_ok
        parent, owned = self._borrow(parts[:-1])
        try:
            # A given lstat was taken through this same cached directory fd; a fresh fd (past
            # the cache) may be another directory by now, so its entry is lstat'ed again.
            return open_file_at(parent, parts[-1], shown, linked, None if owned else lstat)
        finally:
            if owned:
                os.close(parent)

    def read_head(
        self, relative: str, limit: int, *, hard_links_ok: bool | None = None
    ) -> tuple[bytes, bool]:
        """The first *limit* bytes of a file, and whether there was more."""
        read = self.read_file(relative, limit, hard_links_ok=hard_links_ok)
        return read.data, read.more

    def read_file(
        self,
        relative: str,
        limit: int,
        *,
        hard_links_ok: bool | None = None,
        lstat: os.stat_result | None = None,
    ) -> FileRead:
        """The first *limit* bytes of a file with the fstat of what was opened: when it was all
        read, `write_read` can store exactly these bytes instead of opening the file again.

        *hard_links_ok* as for `open_file`. *lstat*: what `lstat` returned for *relative* just
        before, which spares taking it again: it is checked all the same before the open (a
        FIFO or device is never opened), and what was opened is then checked from its fstat.
        """
        parts = _split(relative)
        fd, st = self._open_parts(parts, hard_links_ok, lstat)
        try:
            data = read_fd(fd, limit + 1, st.st_size)
        finally:
            os.close(fd)
        return FileRead("/".join(parts), data[:limit], len(data) > limit, st)

    def read_bytes(
        self,
        relative: str,
        limit: int,
        *,
        hard_links_ok: bool | None = None,
        lstat: os.stat_result | None = None,
    ) -> bytes:
        """A whole file; Refused when it is larger than *limit* bytes. *hard_links_ok* and
        *lstat* as for `read_file`."""
        read = self.read_file(relative, limit, hard_links_ok=hard_links_ok, lstat=lstat)
        if read.more:
            raise Refused(read.shown, f"larger than the {limit}-byte cap for this file")
        return read.data

    def copy_file(
        self, relative: str, dest: Path | CopySink, name: str, budget: CopyBudget
    ) -> bool:
        """Copy one file into *dest* (a directory the caller made, or a sink) as *name*,
        within *budget*.

        False, with the reason in `budget.refused` and nothing written, when it is not a plain
        file reached without a link, or does not fit the budget.
        """
        parts = split_relative(relative)
        files_before = budget.files
        try:
            src = self._walk(parts[:-1])
        except Refused as exc:
            budget.refuse(exc)
            return False
        try:
            with _sink_of(dest) as sink:
                self._copy_one(src, parts[-1], "/".join(parts), sink, name, budget)
        except _FilesCapReached:
            pass
        finally:
            os.close(src)
        return budget.files > files_before

    def copy_tree(
        self, relative: str, dest: Path | CopySink, budget: CopyBudget, *, target: str = ""
    ) -> None:
        """Copy the directory *relative* to a new directory: *dest* itself (a path), or
        *target* in a sink. Real directories and plain files only, within *budget*; each
        entry left out is in `budget.refused`.

        Raises Refused only when *relative* itself is a link or not a directory.
        """
        parts = split_relative(relative)
        src, owned = self._borrow(parts)
        try:
            if isinstance(dest, Path):
                os.mkdir(dest, 0o755)
            else:
                dest.make_dir(target)
            with _sink_of(dest) as sink:
                self._copy_level(src, sink, target, "/".join(parts), budget, depth=0)
        except _FilesCapReached:
            pass
        finally:
            if owned:
                os.close(src)

    def copy_entries(
        self,
        relative: str,
        sink: CopySink,
        budget: CopyBudget,
        renamed: Mapping[str, str] | None = None,
    ) -> None:
        """Copy the entries of the directory *relative* (only those *renamed* names, under
        their new names) into the root of *sink*, a directory that may already hold files:
        an entry whose name is taken there is refused, and what holds the name is left as
        it is (a link planted there included: nothing is written through it)."""
        try:
            names = self.names(relative)
        except Refused as exc:
            budget.refuse(exc)
            return
        for name in names:
            target = name if renamed is None else renamed.get(name)
            if target is None:
                continue
            shown = f"{relative}/{name}" if relative else name
            try:
                if self.is_dir(shown):
                    self.copy_tree(shown, sink, budget, target=target)
                else:
                    self.copy_file(shown, sink, target, budget)
            except FileExistsError:
                budget.refuse(Refused(shown, f"{target} is taken in the destination"))

    def _copy_level(
        self, src: int, sink: CopySink, out: str, shown: str, budget: CopyBudget, depth: int
    ) -> None:
        with os.scandir(src) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            where = f"{shown}/{name}" if shown else name
            target = f"{out}/{name}" if out else name
            try:
                st = os.stat(name, dir_fd=src, follow_symlinks=False)
            except FileNotFoundError:
                continue
            try:
                if not stat.S_ISDIR(st.st_mode):
                    self._copy_one(src, name, where, sink, target, budget, st)
                    continue
                if depth >= MAX_DEPTH:
                    raise Refused(where, f"nested deeper than {MAX_DEPTH} directories")
                below = open_dir_at(src, name, where)
                try:
                    sink.make_dir(target)
                    self._copy_level(below, sink, target, where, budget, depth + 1)
                finally:
                    os.close(below)
            except Refused as exc:
                budget.refuse(exc)
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed or replaced while we copied: nothing of it is taken

    def _copy_one(
        self,
        src: int,
        name: str,
        shown: str,
        sink: CopySink,
        target: str,
        budget: CopyBudget,
        lstat: os.stat_result | None = None,
    ) -> None:
        """Copy one entry of the directory *src* (*lstat*: its lstat through *src*, when the
        caller just took it)."""
        if budget.files >= budget.max_files:
            budget.refuse(
                Refused(
                    shown, f"over the cap of {budget.max_files} files: it and the rest not copied"
                )
            )
            raise _FilesCapReached
        try:
            fd, st = open_file_at(src, name, shown, self.hard_links_ok, lstat)
        except Refused as exc:
            budget.refuse(exc)
            return
        try:
            if not budget.admits(shown, st.st_size):
                return
            copied = sink.copy_from(target, fd, st)
        finally:
            os.close(fd)
        budget.bytes += copied
        budget.files += 1


def read_named_head(
    path: Path, limit: int, root_marker: str, *, hard_links_ok: bool = False
) -> tuple[bytes, bool]:
    """The head of a file a user named by path, and whether there was more.

    Below the outermost directory on the path that holds *root_marker* (a trial directory's
    own file), no link is followed; the directories above it are the user's to name. A path
    through no such directory only has its last component opened without following.
    """
    absolute = Path(os.path.abspath(path))  # lexical: resolving would follow the links
    for ancestor in reversed(absolute.parents):
        try:
            marked = stat.S_ISREG(os.lstat(ancestor / root_marker).st_mode)
        except OSError:
            marked = False
        if marked:
            with SafeDir.open(ancestor, hard_links_ok=hard_links_ok) as root:
                return root.read_head(absolute.relative_to(ancestor).as_posix(), limit)
    with SafeDir.open(absolute.parent, hard_links_ok=hard_links_ok) as parent:
        return parent.read_head(absolute.name, limit)
