"""Host-side canaries for the model-task security trials: servers that record every
connection, and files whose reads and writes show in their times."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

# A file's state: its bytes, mtime and atime (ns).
FileState = tuple[bytes, int, int]
_OLD = 1_000_000_000  # an atime this old is updated by any read (relatime)


class CanaryServer:
    """A TCP server that records every connection and what was sent on it."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.host, self.port = self.sock.getsockname()
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536) or b"(connected)")
                except OSError:
                    self.received.append(b"(connected)")

    def close(self) -> None:
        """Stop listening."""
        self.sock.close()


def outside_address() -> str | None:
    """A non-loopback IPv4 address of this host (what a sandbox should still reach), if any."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.123", 9))  # no packet is sent: picks the outbound interface
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def watch_files(paths: list[Path]) -> dict[Path, FileState]:
    """Remember each file and set its times old, so that a later read or write shows."""
    state = {}
    for path in paths:
        data = path.read_bytes()
        os.utime(path, (_OLD, _OLD))
        st = path.stat()
        state[path] = (data, st.st_mtime_ns, st.st_atime_ns)
    return state


def touched_files(state: dict[Path, FileState]) -> list[Path]:
    """The watched files that were read or written since (this check's own read is undone)."""
    touched = []
    for path, (data, mtime, atime) in state.items():
        st = path.stat()
        if (st.st_mtime_ns, st.st_atime_ns) != (mtime, atime) or path.read_bytes() != data:
            touched.append(path)
        os.utime(path, ns=(atime, mtime))
    return touched
