"""Run inside a sandbox: try to reach each of the host's listeners, every way a hostile agent
might, and undo the routes that keep them out.

``python3 host_address_probe.py TARGETS_JSON`` where TARGETS_JSON is a list of
``[proto, host, port]``; prints one JSON object ``{"proto host port how": outcome}``.
Standard library only (it runs on the sandbox's system python).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

IP_UNICAST_IF = 50
DEVICE = "tap0"
HOWS = ("plain", "bind-device", "unicast-if")


def _prepare(sock: socket.socket, how: str, family: int) -> None:
    if how == "bind-device":  # on-link assumption when the route is prohibit
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, DEVICE.encode())
    elif how == "unicast-if" and family == socket.AF_INET:
        index = socket.if_nametoindex(DEVICE)
        sock.setsockopt(socket.IPPROTO_IP, IP_UNICAST_IF, struct.pack("!I", index))


def _address(host: str, port: int) -> tuple[int, tuple]:
    if ":" in host:
        info = socket.getaddrinfo(host, port, socket.AF_INET6)[0][4]
        return socket.AF_INET6, info
    return socket.AF_INET, (host, port)


def try_target(proto: str, host: str, port: int, how: str) -> str:
    """'open' (TCP connected), 'sent' (UDP datagram left), or the error's name."""
    try:
        family, address = _address(host, port)
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        with socket.socket(family, kind) as sock:
            sock.settimeout(3)
            _prepare(sock, how, family)
            if proto == "tcp":
                sock.connect(address)
                return "open"
            sock.sendto(f"hit {how}".encode(), address)
            return "sent"
    except OSError as exc:
        return type(exc).__name__


def undo_routes() -> dict[str, int]:
    """Try to remove the block (each must fail: no CAP_NET_ADMIN in the sandbox)."""
    tries = {
        "flush-table": ["ip", "route", "flush", "table", "7411"],
        "del-rule": ["ip", "rule", "del", "pref", "200"],
        "add-rule": ["ip", "rule", "add", "pref", "50", "lookup", "main"],
    }
    return {
        name: subprocess.run(argv, capture_output=True).returncode for name, argv in tries.items()
    }


def main() -> None:
    targets = json.loads(sys.argv[1])
    result: dict[str, object] = {"undo": undo_routes()}
    tries = [(p, h, int(n), how) for p, h, n in targets for how in HOWS]
    # At once: a datagram or SYN to an address that ARP cannot resolve takes its timeout.
    with ThreadPoolExecutor(max_workers=32) as pool:
        outcomes = pool.map(lambda t: try_target(*t), tries)
    for (proto, host, port, how), outcome in zip(tries, outcomes):
        result[f"{proto} {host} {port} {how}"] = outcome
    print(json.dumps(result))


if __name__ == "__main__":
    main()
