"""File transfers between the host and a directory tree an agent controls, following none of its links.

A sandbox's writable root is a host directory whose every byte the agent may have written,
and programs it left running may still be changing it while the host copies. So:

- **uploads** (host -> sandbox) open each directory below the trusted root fd-relative
  with O_NOFOLLOW, replace a link or file planted where a directory belongs, and create
  each file with O_CREAT|O_EXCL|O_NOFOLLOW after unlinking whatever had its name: a write
  never lands anywhere but the new file;
- **downloads** (sandbox -> host) read through :class:`posttrainbench.core.safe_fs.SafeDir`
  (no link followed, no FIFO or device opened, sparse files refused, bytes and files
  capped) into a private staging directory, then move the copies into the host target.
  A host file that trusted host code wrote there (Harbor's ``exit-code.txt``, the
  re-prompting wrapper's log) is never replaced by a same-named file from the sandbox;
  what was refused is listed in :data:`REFUSED_FILE` beside the copies.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.nofollow import DIR_FLAGS, NEW_FILE_FLAGS, Refused, split_relative
from posttrainbench.core.safe_fs import CopyBudget, SafeDir

_RETRIES = 5
# What one download may bring to the host. /logs/artifacts carries final_model, which
# the collect hook caps at a multiple of the base model's size before it gets here.
ARTIFACTS_PREFIX = "logs/artifacts"
DOWNLOAD_MAX_BYTES = 4 * 1024**3
ARTIFACTS_MAX_BYTES = 256 * 1024**3
DOWNLOAD_MAX_FILES = 200_000
REFUSED_FILE = "ptb_transfer_refused.json"


class TransferError(OSError):
    """A transfer could not be done without following a link the sandbox planted."""


class RefusedEntries(BaseModel):
    """``ptb_transfer_refused.json``: entries of a download that were not copied, and why."""

    model_config = ConfigDict(extra="forbid")

    source: str
    refused: list[str]


# ---------------------------------------------------------------------------- uploads


def _open_dir_creating(parent: int, name: str) -> int:
    """The directory ``name`` below ``parent``, made if missing; a link or file there is replaced."""
    for _ in range(_RETRIES):
        try:
            return os.open(name, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            os.unlink(name, dir_fd=parent)  # unlinks the link itself, never its target
    raise TransferError(errno.EAGAIN, f"{name}: kept changing while a directory was made there")


def _walk_creating(root: Path, parts: list[str]) -> int:
    fd = os.open(root, DIR_FLAGS)
    try:
        for name in parts:
            below = _open_dir_creating(fd, name)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _clear_name(parent: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=parent)  # fd-based: links inside are removed, not followed
    else:
        os.unlink(name, dir_fd=parent)


def _write_new(parent: int, name: str, source: Path) -> None:
    st = os.stat(source)
    for _ in range(_RETRIES):
        _clear_name(parent, name)
        try:
            out = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=parent)
            break
        except FileExistsError:
            continue  # something was put there again meanwhile
    else:
        raise TransferError(errno.EEXIST, f"{name}: kept reappearing while it was uploaded")
    try:
        with source.open("rb") as handle, os.fdopen(os.dup(out), "wb") as sink:
            shutil.copyfileobj(handle, sink, 1024 * 1024)
        os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o777)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(out)


def _upload_level(source: Path, out: int) -> None:
    with os.scandir(source) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        if entry.is_symlink():
            _clear_name(out, entry.name)
            os.symlink(os.readlink(entry.path), entry.name, dir_fd=out)
        elif entry.is_dir():
            below = _open_dir_creating(out, entry.name)
            try:
                _upload_level(Path(entry.path), below)
            finally:
                os.close(below)
        elif entry.is_file():
            _write_new(out, entry.name, Path(entry.path))


def upload_file(source: Path, root: Path, relative: str) -> None:
    """Copy the host file ``source`` to ``root/relative``, creating directories on the way."""
    if not source.is_file():
        raise FileNotFoundError(f"{source} does not exist")
    parts = split_relative(relative)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the target is the root itself", str(root))
    parent = _walk_creating(root, parts[:-1])
    try:
        _write_new(parent, parts[-1], source)
    finally:
        os.close(parent)


def upload_dir(source: Path, root: Path, relative: str) -> None:
    """Merge the host directory ``source`` into ``root/relative`` (made if missing)."""
    if not source.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(source))
    out = _walk_creating(root, split_relative(relative))
    try:
        _upload_level(source, out)
    finally:
        os.close(out)


# -------------------------------------------------------------------------- downloads


def download_budget(relative: str) -> CopyBudget:
    """The caps of one download from ``relative`` (below a sandbox's root)."""
    artifacts = "/".join(split_relative(relative)).startswith(ARTIFACTS_PREFIX)
    return CopyBudget(
        max_bytes=ARTIFACTS_MAX_BYTES if artifacts else DOWNLOAD_MAX_BYTES,
        max_files=DOWNLOAD_MAX_FILES,
    )


class Downloader:
    """Downloads from one sandbox into host directories; remembers which host files it made.

    ``hard_links_ok``: a hard link below ``root`` can only name another file below it
    (true of a sandbox's own root, where links across its mounts fail with EXDEV).
    """

    def __init__(self, logger: logging.Logger, *, hard_links_ok: bool = True) -> None:
        self.logger = logger
        self.hard_links_ok = hard_links_ok
        self._made: set[Path] = set()

    def download_dir(
        self, root: Path, relative: str, target: Path, *, source: str | None = None
    ) -> None:
        """Copy the directory ``root/relative`` into ``target`` (merging, made if missing).

        ``source``: the path in the sandbox (its caps), when ``root`` is a staging copy.
        """
        budget = download_budget(source if source is not None else relative)
        target = Path(target)
        target.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".ptb-download-", dir=target.parent))
        try:
            with SafeDir.open(root, hard_links_ok=self.hard_links_ok) as safe:
                if not safe.is_dir(relative):
                    raise NotADirectoryError(
                        errno.ENOTDIR, "not a directory in the sandbox", relative
                    )
                safe.copy_tree(relative, staging / "tree", budget)
            self._merge(staging / "tree", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self._record_refusals(source or relative, target, budget)

    def download_file(
        self, root: Path, relative: str, target: Path, *, source: str | None = None
    ) -> None:
        """Copy the regular file ``root/relative`` to the host path ``target``."""
        budget = download_budget(source if source is not None else relative)
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".ptb-download-", dir=target.parent))
        try:
            with SafeDir.open(root, hard_links_ok=self.hard_links_ok) as safe:
                try:
                    copied = safe.copy_file(relative, staging, target.name, budget)
                except (FileNotFoundError, NotADirectoryError) as exc:
                    raise FileNotFoundError(f"{relative} does not exist in the sandbox") from exc
            if not copied:
                raise TransferError(
                    errno.EPERM, f"not downloaded: {'; '.join(budget.refusal_lines())}"
                )
            self._place(staging / target.name, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _merge(self, staging: Path, target: Path) -> None:
        # Both trees are the host's own: staging holds only what SafeDir created.
        with os.scandir(staging) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            dest = target / entry.name
            if entry.is_dir(follow_symlinks=False):
                if os.path.islink(dest) or (os.path.lexists(dest) and not dest.is_dir()):
                    self.logger.warning(
                        "download: %s is not a directory on the host; left as it is", dest
                    )
                    continue
                dest.mkdir(exist_ok=True)
                self._merge(Path(entry.path), dest)
            else:
                self._place(Path(entry.path), dest)

    def _place(self, copy: Path, dest: Path) -> None:
        if os.path.lexists(dest) and dest not in self._made:
            self.logger.warning(
                "download: kept the host's own %s (a file of that name came from the sandbox)", dest
            )
            return
        os.replace(copy, dest)
        self._made.add(dest)

    def _record_refusals(self, relative: str, target: Path, budget: CopyBudget) -> None:
        lines = budget.refusal_lines()
        if not lines:
            return
        self.logger.warning(
            "download of %s: %d entries refused (%s)", relative, len(lines), lines[0]
        )
        record = target / REFUSED_FILE
        if os.path.lexists(record) and record not in self._made:
            return
        record.write_text(
            RefusedEntries(source=relative, refused=lines).model_dump_json(indent=2) + "\n"
        )
        self._made.add(record)


def remove_file(root: Path, relative: str) -> None:
    """Unlink ``root/relative`` if it exists, reaching it without following links."""
    parts = split_relative(relative)
    try:
        with SafeDir.open(root) as safe:
            parent = safe.subdir("/".join(parts[:-1])) if parts[:-1] else None
            fd = parent.fd if parent else safe.fd
            try:
                os.unlink(parts[-1], dir_fd=fd)
            finally:
                if parent:
                    parent.close()
    except (FileNotFoundError, NotADirectoryError, Refused):
        pass
