"""Where an agent could have written, and since when: the bounds of its write set.

- :func:`writable_mounts` reads ``/proc/self/mountinfo``: every mount that is writable
  and holds files (not proc, sysfs, cgroups and the like). The same on the local
  sandbox (a writable root, the /opt/ptb overlay, the /logs binds, /dev) and in Docker
  (the overlay root, /dev/shm, the binds).
- :func:`agent_clock_start`: when the agent's clock started, from the stamp root writes
  right before the agent is set up (``/logs/agent/ptb_start_time``, root's, 0644, in a
  sticky directory: the agent can neither rewrite nor replace it). A file's ctime is set
  by the kernel and a non-root agent cannot set it back, so files with a ctime at or
  after that moment are exactly the ones written or changed since. The earlier of the
  stamp's ctime and mtime counts (the kernel's, to the nanosecond: the same clock as every
  file's ctime), bounded by its content plus one second (the content is whole seconds,
  rounded down, so honestly it is never more than a second before either). The mtime
  matters once the stamp was copied back after the agent ran: where ``/logs/agent`` is
  not a bind mount (the local sandbox), Harbor uploads it into the instance again, which
  replaces the stamp with a copy whose ctime is that moment but whose mtime is the
  original's (with the ctime alone the bound fell to the content plus one second, and
  what the agent wrote in the stamp's own second was left out of the window). Only root
  can set the mtime of root's file, and the earlier time only widens the window. The
  start hook waits :data:`ASSEMBLY_GAP_S` after its last write before the stamp, so
  nothing of the instance's assembly falls in the window, even within the same second
  (issue 36, item 7: the whole-second content alone put all of ``/etc`` and ``/opt/ptb``
  in it). A stamp that is missing, not a regular file, not root's or writable by others
  is not trusted, and then every file counts.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.core.nofollow import FILE_FLAGS

VIRTUAL_FS = frozenset(
    {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "devpts",
        "mqueue",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "binfmt_misc",
        "autofs",
        "hugetlbfs",
        "efivarfs",
        "nsfs",
        "rpc_pipefs",
        "selinuxfs",
    }
)
# Timestamps of some filesystems are a jiffy coarse (4 ms at 250 Hz).
CLOCK_SLACK_S = 0.05
# How long the start hook waits between the instance's last write and the stamp: well
# above the slack, so the window never reaches back into the assembly.
ASSEMBLY_GAP_S = 0.2


@dataclass(frozen=True)
class Mount:
    """One mount of the mount namespace."""

    point: str
    fstype: str
    writable: bool


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \\ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/<pid>/mountinfo`` text."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 7:
            continue
        sep = fields.index("-")
        if len(fields) < sep + 4:
            continue
        options = set(fields[5].split(",")) | set(fields[sep + 3].split(","))
        mounts.append(Mount(_unescape(fields[4]), fields[sep + 1], "ro" not in options))
    return mounts


def writable_mounts(
    mountinfo: Path = Path("/proc/self/mountinfo"),
) -> tuple[list[Mount], list[Mount]]:
    """(writable mounts that hold files, every mount), from *mountinfo*."""
    every = parse_mountinfo(mountinfo.read_text(encoding="utf-8", errors="replace"))
    return [m for m in every if m.writable and m.fstype not in VIRTUAL_FS], every


def _stamp_times(stamp: Path) -> tuple[list[float], str]:
    """The stamp's ctime, mtime and content when it can be trusted, and why not otherwise;
    never following a link or blocking on a FIFO."""
    try:
        fd = os.open(stamp, FILE_FLAGS)
    except OSError as exc:
        return [], f"{stamp} cannot be opened ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != 0
            or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return [], f"{stamp} is not a regular file only root can write"
        times = [st.st_ctime, st.st_mtime]
        try:
            value = float(os.read(fd, 64).strip() or "nan")
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            times.append(value)
        return times, f"the agent's clock stamp {stamp}"
    finally:
        os.close(fd)


def agent_clock_start(stamp: Path | None) -> tuple[float, str]:
    """(the write set's start, in epoch seconds, and how it was found); see the module docstring.

    0.0 (every file) when the stamp cannot be trusted.
    """
    if stamp is None:
        return 0.0, "no clock stamp given: every file counts"
    times, source = _stamp_times(stamp)
    if not times:
        return 0.0, f"{source}: every file counts"
    ctime, mtime, *content = times
    return max(0.0, min(ctime, mtime, *(c + 1 for c in content)) - CLOCK_SLACK_S), source
