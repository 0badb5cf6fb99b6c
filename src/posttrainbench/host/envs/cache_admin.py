"""Who uses the local layer cache, and pruning it (``ptb cache list|prune``).

Each cache entry ``<cache>/envs/<name>-<key>`` has two files beside it: ``.lock``, held
exclusively while the entry is built, and ``.use``, on which every running sandbox
instance holds a shared lock for its whole life (:class:`LayerHolds`) and whose mtime is
the entry's last use. Pruning takes ``.use`` exclusively without waiting, so an entry a
running trial uses is never removed, and renames the entry out of place before deleting
it, so nobody ever sees half of one.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from posttrainbench.core.errors import PtbError
from posttrainbench.host.envs.lock_probe import lock_held

BUILD_PREFIX = ".build-"
"""An entry is built in ``<envs>/.build-<entry name>-<random>``, renamed into place when
complete; one whose build lock is free was left by a build that was killed."""
MAX_SIZE_ENV = "PTB_CACHE_MAX_GB"
"""A size cap: past it, a build prunes the least recently used entries no trial uses."""

_GIB = 1024**3


def use_file(entry: Path) -> Path:
    """The file whose shared locks say who uses ``entry`` and whose mtime is its last use."""
    return entry.with_name(entry.name + ".use")


@dataclass
class LayerHolds:
    """Shared locks on the ``.use`` files of one instance's layers, until :meth:`release`."""

    entries: list[Path]
    _files: list[IO[bytes]] = field(default_factory=list)

    def acquire(self) -> bool:
        """Hold every entry; False (holding none) if one was pruned before it was held."""
        for entry in self.entries:
            handle = use_file(entry).open("ab")
            fcntl.flock(handle, fcntl.LOCK_SH)
            self._files.append(handle)
            if not entry.is_dir():
                self.release()
                return False
            os.utime(use_file(entry))
        return True

    def release(self) -> None:
        """Drop every lock (idempotent); the entries may be pruned from now on."""
        for handle in self._files:
            handle.close()
        self._files.clear()


@dataclass(frozen=True)
class CacheEntry:
    """One layer entry of the cache, as ``ptb cache list`` shows it."""

    path: Path
    layer: str
    size_bytes: int
    last_used: float
    in_use: bool
    held_by: tuple[str, ...]


def dir_size(path: Path) -> int:
    """Bytes allocated to the files under *path* (links not followed)."""
    total = 0
    for directory, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _unescape(field_text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field_text)


def _mount_holders(mounts: Path = Path("/proc/mounts")) -> dict[str, list[str]]:
    """Entry path -> trial dirs of the overlay mounts stacked on it (``<trial>/sandbox/<id>/ptb/upper``)."""
    holders: dict[str, list[str]] = {}
    for line in mounts.read_text().splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] != "overlay":
            continue
        options = dict(opt.split("=", 1) for opt in parts[3].split(",") if "=" in opt)
        upper = Path(_unescape(options.get("upperdir", "")))
        if not options.get("lowerdir") or len(upper.parents) < 4:
            continue
        for lower in _unescape(options["lowerdir"]).split(":"):
            holders.setdefault(lower, []).append(str(upper.parents[3]))
    return holders


def _entries(envs: Path) -> list[Path]:
    if not envs.is_dir():
        return []
    return sorted(
        p
        for p in envs.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name != "failed"
    )


def build_dir_prefix(name: str) -> str:
    """The prefix of the temporary directory an entry *name* is built in."""
    return f"{BUILD_PREFIX}{name}-"


def orphan_builds(envs: Path) -> list[Path]:
    """Build directories no build is working in: what a killed build left behind."""
    if not envs.is_dir():
        return []
    found = []
    for path in sorted(envs.iterdir()):
        if not path.name.startswith(BUILD_PREFIX) or not path.is_dir() or path.is_symlink():
            continue
        name = path.name[len(BUILD_PREFIX) :].rpartition("-")[0]
        if not lock_held(envs / f"{name}.lock", shared_counts=True):
            found.append(path)
    return found


def remove_orphan_builds(envs: Path, name: str | None = None) -> list[Path]:
    """Remove what killed builds left (of entry *name* only, when given: its builder,
    holding its lock, calls this first). Returns what it removed."""
    removed = []
    for path in orphan_builds(envs):
        if name is None or path.name.startswith(build_dir_prefix(name)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def hold_for_process(entry: Path) -> None:
    """A shared hold on *entry* until this process exits (a host command that runs its
    Python): no prune removes it meanwhile, and its last use is now."""
    handle = use_file(entry).open("ab")
    fcntl.flock(handle, fcntl.LOCK_SH)
    os.utime(use_file(entry))
    _PROCESS_HOLDS.append(handle)


_PROCESS_HOLDS: list[IO[bytes]] = []


def _in_use(entry: Path) -> bool:
    path = use_file(entry)
    if not path.exists():
        return False
    with path.open("ab") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def list_entries(envs: Path) -> list[CacheEntry]:
    """Every entry under ``envs`` with its size, last use, and the running trials that hold it."""
    holders = _mount_holders()
    out = []
    for entry in _entries(envs):
        use = use_file(entry)
        last = use.stat().st_mtime if use.exists() else entry.stat().st_mtime
        out.append(
            CacheEntry(
                entry,
                entry.name.split("-", 1)[0],
                dir_size(entry),
                last,
                _in_use(entry),
                tuple(sorted(set(holders.get(str(entry), [])))),
            )
        )
    return out


def _remove(entry: Path) -> bool:
    """Remove ``entry`` unless a trial holds it; True if removed. An instance that holds
    it next finds it gone and has it built again (:meth:`LayerHolds.acquire`)."""
    with use_file(entry).open("ab") as use:
        try:
            fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not entry.is_dir():
            return False
        trash = entry.with_name(f".trash-{entry.name[:40]}-{os.getpid()}-{time.monotonic_ns()}")
        os.rename(entry, trash)
    shutil.rmtree(trash, ignore_errors=True)
    return True


def prune(
    envs: Path,
    max_size_bytes: int | None = None,
    older_than_s: float | None = None,
    dry_run: bool = False,
) -> list[CacheEntry]:
    """Remove entries no running trial uses: those unused for ``older_than_s``, then the least
    recently used until the cache fits ``max_size_bytes``. Returns what it removed (or
    would remove, with ``dry_run``)."""
    entries = sorted(list_entries(envs), key=lambda e: e.last_used)
    total = sum(e.size_bytes for e in entries)
    now = time.time()
    removed = []
    for entry in entries:
        too_old = older_than_s is not None and now - entry.last_used > older_than_s
        too_big = max_size_bytes is not None and total > max_size_bytes
        if entry.in_use or not (too_old or too_big):
            continue
        if dry_run or _remove(entry.path):
            removed.append(entry)
            total -= entry.size_bytes
    return removed


def prune_to_cap(envs: Path) -> list[CacheEntry]:
    """Prune to ``$PTB_CACHE_MAX_GB`` when it is set (after a build); nothing otherwise."""
    cap = os.environ.get(MAX_SIZE_ENV)
    if not cap:
        return []
    try:
        gib = float(cap)
    except ValueError:
        raise PtbError(f"{MAX_SIZE_ENV}={cap!r} is not a size in GB") from None
    return prune(envs, max_size_bytes=int(gib * _GIB))
