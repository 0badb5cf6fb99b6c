"""Untrusted identities: a fresh uid for every candidate run, and the kernel's view of what
each identity still has running.

A root service never reuses a uid (the pool file records every uid it issued), so nothing
a finished run left behind (a process, a file in a corner it could write) is ever
handed to a later run. Processes are found by uid in ``/proc`` and killed *as* that uid with
``kill(-1, SIGKILL)``, which reaches every process of the uid however it daemonized and
races no fork; the rounds repeat until ``/proc`` shows none (checked, not assumed).
"""

from __future__ import annotations

import grp
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.service.shared.errors import ServiceStateError
from posttrainbench.service.shared.launcher_python import launcher_python
from posttrainbench.service.shared.locked_json import exclusive, read_model, write_model

UID_FIRST = 50000  # below 65536, so it exists in a user-namespace-remapped container too
UID_COUNT = 10000
REAP_ROUNDS = 100
_ROUND_PAUSE_S = 0.05
_KILL_AS = "import os, sys\ntry:\n    os.kill(-1, int(sys.argv[1]))\nexcept ProcessLookupError:\n    pass\n"


class ContainmentError(ServiceStateError):
    """Processes of an untrusted identity could not be stopped or killed."""


class Identity(BaseModel):
    """Who an untrusted process runs as (``uid is None``: this process's own user, no switch)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    uid: int | None = None
    gid: int | None = None

    @property
    def switches(self) -> bool:
        """Whether commands are wrapped to change user."""
        return self.uid is not None


class PoolFile(BaseModel):
    """``identities.json``: every uid the service issued, oldest first."""

    model_config = ConfigDict(extra="forbid")

    issued: list[int] = Field(default_factory=list)


def current_identity() -> Identity:
    """The identity of this (non-root) process: candidates then run as the service's own user."""
    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (common in containers)
        name = str(uid)
    return Identity(name=name)


def user_identity(name: str) -> Identity:
    """An existing, non-root user (the agent's) as an identity."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ServiceStateError(f"user {name!r} does not exist") from None
    if entry.pw_uid == 0:
        raise ServiceStateError(f"user {name!r} is root: it cannot be an untrusted identity")
    return Identity(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


class IdentityPool:
    """Issues uids nobody has used: not in passwd/group, not running, never issued before."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def issue(self) -> Identity:
        """A fresh identity, recorded before it is returned; a non-root service gets its own."""
        if os.geteuid() != 0:
            return current_identity()
        with exclusive(self.path):
            state = read_model(self.path, PoolFile)
            used = set(state.issued) | set(untrusted_processes())
            for uid in range(UID_FIRST, UID_FIRST + UID_COUNT):
                if uid not in used and not _named(uid):
                    state.issued.append(uid)
                    write_model(self.path, state)
                    return Identity(name=f"ptb-run-{uid}", uid=uid, gid=uid)
        raise ContainmentError(f"all {UID_COUNT} candidate uids from {UID_FIRST} are used up")

    def issued(self) -> list[int]:
        """Every uid issued so far."""
        with exclusive(self.path):
            return list(read_model(self.path, PoolFile).issued)


def _named(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def _status(pid: str) -> tuple[str, set[int]] | None:
    """(state letter, uids) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    state, uids = "?", set()
    for line in text.splitlines():
        if line.startswith("State:"):
            state = line.split()[1]
        elif line.startswith("Uid:"):
            uids = {int(v) for v in line.split()[1:]}
    return state, uids


def _processes() -> Iterator[tuple[int, str, set[int]]]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _status(entry)
            if found is not None and found[0] not in ("Z", "X"):  # the dead run no code
                yield int(entry), found[0], found[1]


def is_running(pid: int) -> bool:
    """Whether *pid* exists and is not a zombie."""
    found = _status(str(pid))
    return found is not None and found[0] not in ("Z", "X")


def processes_of(uid: int) -> list[int]:
    """Live pids whose real, effective, saved or filesystem uid is *uid*."""
    return [pid for pid, _, uids in _processes() if uid in uids]


def untrusted_processes() -> dict[int, list[int]]:
    """Live non-root processes in this pid namespace, by uid."""
    found: dict[int, list[int]] = {}
    for pid, _, uids in _processes():
        for uid in uids - {0}:
            found.setdefault(uid, []).append(pid)
    return found


def signal_all(identity: Identity, sig: int) -> None:
    """``kill(-1, sig)`` as *identity*: every process of its uid but the sender gets *sig*."""
    assert identity.uid is not None
    subprocess.run(
        [launcher_python(), "-I", "-S", "-c", _KILL_AS, str(int(sig))],
        user=identity.uid,
        group=identity.gid if identity.gid is not None else identity.uid,
        extra_groups=[],
        env={},
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )


def reap(identity: Identity, rounds: int = REAP_ROUNDS) -> int:
    """Kill every process of *identity* and check that none is left; return how many there were.

    A non-switching identity is this process's own user: nothing is killed here (its runs
    are stopped by process group), and 0 is returned.
    """
    if not identity.switches:
        return 0
    assert identity.uid is not None
    seen: set[int] = set()
    for _ in range(rounds):
        alive = processes_of(identity.uid)
        if not alive:
            return len(seen)
        seen.update(alive)
        signal_all(identity, signal.SIGKILL)
        time.sleep(_ROUND_PAUSE_S)
    left = processes_of(identity.uid)
    if not left:
        return len(seen)
    raise ContainmentError(
        f"{len(left)} process(es) of uid {identity.uid} survived {rounds} kill rounds"
    )


def reap_untrusted(rounds: int = REAP_ROUNDS) -> dict[int, int]:
    """Kill every non-root process, whatever its uid; return {uid: processes seen}.

    Raises ``ContainmentError`` when any survives (the caller records it)."""
    seen: dict[int, int] = {}
    for uid, pids in untrusted_processes().items():
        seen[uid] = reap(Identity(name=str(uid), uid=uid, gid=uid), rounds)
        seen[uid] = max(seen[uid], len(pids))
    left = untrusted_processes()
    if left:
        raise ContainmentError(f"untrusted processes survived: {sorted(left)}")
    return seen
