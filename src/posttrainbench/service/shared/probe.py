"""What an identity can actually do, tried for real: run as that identity by the audit.

``python3 -I -S probe.py PLAN_JSON`` prints one JSON object of booleans (True: it worked).
The plan names paths to read (a file's first byte, a directory's listing), directories to
create a file in (created with ``O_EXCL`` and removed at once), files to open for
appending (opened and closed: nothing is written), and loopback ports to connect to.
Sockets of each family are also tried. Standard library only (Python 3.11+).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
from typing import Any


def _read(path: str) -> bool:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read(1)
        return True
    except OSError:
        return False


def _create_in(directory: str) -> bool:
    path = os.path.join(directory, f".ptb-probe-{secrets.token_hex(6)}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass
    return True


def _append(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    os.close(fd)
    return True


def _socket(family: int) -> bool:
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


def _connect(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _seccomp_mode() -> str:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Seccomp:"):
                    return line.split()[1]
    except OSError:
        pass
    return "unknown"


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """Try everything *plan* names; return what worked."""
    return {
        "uid": os.getuid(),
        "seccomp": _seccomp_mode(),
        "read": {p: _read(p) for p in plan.get("read", [])},
        "create_in": {p: _create_in(p) for p in plan.get("create_in", [])},
        "append": {p: _append(p) for p in plan.get("append", [])},
        "connect": {str(p): _connect(int(p)) for p in plan.get("connect", [])},
        "socket": {"inet": _socket(socket.AF_INET), "unix": _socket(socket.AF_UNIX)},
    }


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))))
