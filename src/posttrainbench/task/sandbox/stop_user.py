"""Stop every process of one unprivileged user (the agent's) in this sandbox: the deadline.

Run as root. A child process takes the user's uid (and drops every capability with it)
and sends ``kill(-1, SIGSTOP)``: the kernel delivers it to exactly the processes that
uid may signal, its own, including any a fork in progress creates. Once none of them
runs, ``kill(-1, SIGKILL)`` follows, repeated until no process of the user is left but
zombies. Process names, sessions and parentage play no part, so neither ``setsid`` nor
a double fork nor an ignored SIGTERM helps a process stay.

Prints the number of the user's processes still alive afterwards (0 normally); the
collect hook records it in ``handoff.json``.

Usage: python -P -m posttrainbench.task.sandbox.stop_user --user agent [--timeout-s 10]
"""

from __future__ import annotations

import argparse
import os
import pwd
import signal
import time
from pathlib import Path

_PROC = Path("/proc")


def live_processes(uid: int) -> list[int]:
    """Pids whose real uid is ``uid`` and that are not zombies."""
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":", 1)
                for line in (entry / "status").read_text().splitlines()
                if ":" in line
            )
        except OSError:
            continue  # exited meanwhile
        if int(fields.get("Uid", "-1").split()[0]) == uid and not fields.get(
            "State", ""
        ).strip().startswith("Z"):
            found.append(int(entry.name))
    return found


def signal_all_as(uid: int, gid: int, signum: int) -> None:
    """Send ``signum`` to every process ``uid`` may signal, from a child running as ``uid``."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # from here, no capability: only its own processes
            try:
                os.kill(-1, signum)
            except ProcessLookupError:
                pass  # none left
            code = 0
        finally:
            os._exit(code)
    os.waitpid(child, 0)


def stop_user(user: str, timeout_s: float = 10.0) -> int:
    """Stop and kill every process of ``user``; the number still alive afterwards."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return 0  # no such user: it never ran anything
    uid, gid = entry.pw_uid, entry.pw_gid
    if uid == 0:
        raise ValueError("refusing to stop root's processes")
    for _ in range(3):  # stopped first: none of them runs (or forks) while the rest are found
        signal_all_as(uid, gid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        signal_all_as(uid, gid, signal.SIGKILL)
        alive = live_processes(uid)
        if not alive or time.monotonic() > deadline:
            return len(alive)
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", required=True)
    parser.add_argument("--timeout-s", type=float, default=10.0)
    args = parser.parse_args(argv)
    print(stop_user(args.user, args.timeout_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
