"""The no-follow file primitives: every open of a path an untrusted party could have
written goes through here (docs/security.md, "Reading what an agent wrote").

Each open is relative to a directory fd or a trusted path, with O_NOFOLLOW (a symbolic
link is refused, never followed, even one swapped in between a check and the open) and
O_CLOEXEC; reads also use O_NONBLOCK, so a FIFO or device swapped in cannot block, and
what was opened is checked by its fstat. New files are created with O_EXCL, and a file
is rewritten only by `replace_at`: a new file renamed over the old name in the same
directory fd. `posttrainbench.core.safe_fs` builds reading and copying whole trees on
these. Standard library only.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import PurePosixPath

# No-follow open flags, for every reader and writer of trees an agent wrote.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A handle on a directory that reads nothing (fchmod through /proc/self/fd, *at calls).
PATH_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Why these numbers: a real trace, script or weight file occupies about its size on disk
# (compression rarely gains 8x on them); a large file that occupies an eighth of its size
# is mostly holes, planted to make a reader copy or parse zeros.
SPARSE_RATIO = 8
SPARSE_MIN_BYTES = 64 * 2**20
_CHUNK = 8 * 2**20


class Refused(OSError):
    """An entry a host reader will not open: a link, a special file, a hard link, sparse, over a cap."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[type[Refused], tuple[str, str]]:
        return Refused, (self.path, self.reason)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def kind_of(mode: int) -> str:
    """What a file mode is, in words."""
    for test, word in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def split_relative(relative: str | PurePosixPath) -> list[str]:
    """The components of a path below a root; Refused for an absolute path or one with `..`."""
    # Plain string splitting: PurePosixPath costs ~3.5 us a call against ~0.4, and every
    # read of a trial file goes through here (~20 times a trial).
    text = str(relative)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if text.startswith("/") or ".." in parts:
        raise Refused(text, "not a path inside the directory")
    return parts


def is_sparse(st: os.stat_result) -> bool:
    """Whether a file is large and mostly holes."""
    return st.st_size >= SPARSE_MIN_BYTES and st.st_blocks * 512 * SPARSE_RATIO < st.st_size


def check_file(st: os.stat_result, shown: str, hard_links_ok: bool) -> None:
    """Refused unless *st* is a regular file with one name (or *hard_links_ok*) and not sparse."""
    if st.st_nlink == 1 and st.st_size < SPARSE_MIN_BYTES and stat.S_ISREG(st.st_mode):
        return  # the common case, in one test: a trial file is checked twice before a read
    if stat.S_ISDIR(st.st_mode):  # not an attack, just not a file
        raise IsADirectoryError(errno.EISDIR, "a directory", shown)
    if not stat.S_ISREG(st.st_mode):
        raise Refused(shown, kind_of(st.st_mode))
    if st.st_nlink > 1 and not hard_links_ok:
        raise Refused(shown, f"a hard link ({st.st_nlink} names; another may be outside the trial)")
    if is_sparse(st):
        raise Refused(shown, f"a sparse file ({st.st_size} bytes, {st.st_blocks * 512} on disk)")


def open_dir_at(dir_fd: int, name: str, shown: str) -> int:
    """Open the directory *name* of *dir_fd*; Refused for a link, NotADirectoryError for
    anything else that is not a directory."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise Refused(shown, "a symbolic link")
    raise NotADirectoryError(errno.ENOTDIR, f"{kind_of(st.st_mode)}, not a directory", shown)


def open_file_at(
    dir_fd: int, name: str, shown: str, hard_links_ok: bool, lstat: os.stat_result | None = None
) -> tuple[int, os.stat_result]:
    """Open *name* in *dir_fd* and fstat it; *lstat*: its lstat, when the caller just took it."""
    # lstat first: a FIFO or device is refused before it is ever opened.
    if lstat is None:
        lstat = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    check_file(lstat, shown, hard_links_ok)
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since the lstat
            raise Refused(shown, "a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)  # what was opened is what counts
        check_file(st, shown, hard_links_ok)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_fd(fd: int, limit: int, size: int | None = None) -> bytes:
    """Up to *limit* bytes from *fd*'s position (fewer at its end).

    *size*: the file's size from its fstat, for a read from its start. Reads then ask for no
    more than one byte past it (a small file costs no 8 MiB buffer), and a short read that
    has reached it is taken as the end, sparing the empty read that would only confirm it.
    """
    chunks, total = [], 0
    if size is not None and size < min(limit, _CHUNK):
        # A small file read whole (the common case): one read, short at its end.
        data = os.read(fd, size + 1)
        if len(data) == size or not data:
            return data
        chunks, total = [data], len(data)  # it changed since its fstat: read on
    while total < limit:
        asked = min(_CHUNK, limit - total)
        if size is not None and total <= size:
            asked = min(asked, size - total + 1)
        chunk = os.read(fd, asked)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if size is not None and len(chunk) < asked and total >= size:
            break
    return b"".join(chunks)


def copy_fd(src: int, dst: int, size: int) -> int:
    """Copy at most *size* bytes (the size seen when it was opened: a growing file stops there)."""
    copied = 0
    try:
        while copied < size:
            sent = os.sendfile(dst, src, None, min(size - copied, 2**30))
            if sent == 0:
                break
            copied += sent
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS) or copied:
            raise
        while copied < size:
            chunk = os.read(src, min(_CHUNK, size - copied))
            if not chunk:
                break
            os.write(dst, chunk)
            copied += len(chunk)
    return copied


def replace_at(
    dir_fd: int,
    name: str,
    write: Callable[[int], None],
    mode: int,
    *,
    keep: Callable[[], bool] = lambda: True,
    suffix: str = ".tmp",
) -> bool:
    """Replace the entry *name* of the directory *dir_fd* with a new file that *write* fills.

    The new file is created in that same directory fd (O_EXCL | O_NOFOLLOW) and renamed over
    *name* relative to it, so whatever *name* has become by then (a file, a link an agent
    swapped in) only that directory entry changes: nothing is written through a path, and
    nothing a link names is touched. *write* gets the new file's fd; *mode* is its mode.
    An interruption leaves *name* as it was and no temp file behind. False, with nothing
    changed, when *keep* (asked after the write) says no.
    """
    tmp = f".ptb-{secrets.token_hex(8)}{suffix}"
    fd = os.open(tmp, NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        try:
            write(fd)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if keep():
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return True
        os.unlink(tmp, dir_fd=dir_fd)
        return False
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass  # already renamed, or removed by whoever else writes the directory
        raise


def open_regular(
    path: str | os.PathLike[str], *, dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """Open a regular file for reading, never through a link as its last component and
    never blocking; its fd and fstat. Refused when what was opened is not a regular file.
    No hard-link or sparse check (see `open_file_at` for files an agent wrote)."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(shown, "a symbolic link") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Refused(shown, kind_of(st.st_mode))
    return fd, st


def open_dir(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> int:
    """Open a directory, never through a link as its last component."""
    return os.open(path, DIR_FLAGS, dir_fd=dir_fd)


def create_new(path: str | os.PathLike[str], mode: int, *, dir_fd: int | None = None) -> int:
    """Create a new file for writing (O_EXCL: never an existing file, never through a link)."""
    return os.open(path, NEW_FILE_FLAGS, mode, dir_fd=dir_fd)


def open_for_writing(
    path: str | os.PathLike[str], mode: int, *, append: bool, create: bool = True
) -> int:
    """Open a file for writing without following a link as its last component and without
    blocking: appended to (*append*) or emptied, created with *mode* when *create*."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    flags |= os.O_APPEND if append else os.O_TRUNC
    flags |= os.O_CREAT if create else 0
    return os.open(path, flags, mode)
