"""The host is unreachable from a sandbox at every address it has, not only loopback.

Listeners on ``0.0.0.0`` and ``::`` and on each of the host's own addresses (read here from
its interfaces, not the way the defence reads them), TCP and UDP, and one on an address the
host gains after the sandbox started; a process inside a real local sandbox, as the agent's
unprivileged user and as the sandbox's root, tries each of them plainly, bound to tap0 and
with ``IP_UNICAST_IF``, and tries to remove the block first. The positive control is an
explicitly allowed TCP port on the host's outside address: the network works, that one
port is open, every other stays shut. ~15 s.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from posttrainbench.host.envs.host_addresses import HOST_ALLOW_ENV, format_allowance
from tests.sandbox_support import MakeEnv, requires_bwrap, run
from tests.security.host_canaries import outside_address

pytestmark = requires_bwrap

PROBE = Path(__file__).with_name("host_address_probe.py")
# An address the host gains after the sandbox started (TEST-NET-2, on lo).
LATER = "198.51.100.77"


def _interface_addresses() -> tuple[list[str], list[str]]:
    """(addresses, broadcast addresses) of every interface but loopback."""
    out = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, check=True)
    addresses, broadcasts = [], []
    for link in json.loads(out.stdout):
        for info in link.get("addr_info", []):
            local = info["local"]
            if local.startswith("127.") or local == "::1":
                continue
            scoped = info.get("scope") == "link" and ":" in local
            addresses.append(f"{local}%tap0" if scoped else local)
            if info.get("broadcast"):
                broadcasts.append(info["broadcast"])
    return addresses, broadcasts


class Listeners:
    """TCP and UDP listeners that record who reached them."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self._socks: list[socket.socket] = []

    def listen(self, host: str, port: int = 0) -> int:
        """A TCP and a UDP socket on ``host`` (one port); returns it."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        tcp = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            tcp.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        tcp.bind((host, port))
        tcp.listen(16)
        port = tcp.getsockname()[1]
        udp = socket.socket(family, socket.SOCK_DGRAM)
        if family == socket.AF_INET6:
            udp.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        udp.bind((host, port))
        for sock, serve in ((tcp, self._accept), (udp, self._receive)):
            self._socks.append(sock)
            threading.Thread(target=serve, args=(sock, f"{host}:{port}"), daemon=True).start()
        return port

    def _accept(self, sock: socket.socket, name: str) -> None:
        while True:
            try:
                conn, peer = sock.accept()
            except OSError:
                return
            self.hits.append(f"tcp {name} from {peer[0]}")
            conn.close()

    def _receive(self, sock: socket.socket, name: str) -> None:
        while True:
            try:
                data, peer = sock.recvfrom(256)
            except OSError:
                return
            self.hits.append(f"udp {name} {data!r} from {peer[0]}")

    def close(self) -> None:
        """Stop listening."""
        for sock in self._socks:
            sock.close()


def test_no_address_of_the_host_answers_a_sandbox(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = outside_address()
    if outside is None:
        pytest.skip("this host has no outside address")
    addresses, broadcasts = _interface_addresses()
    listeners = Listeners()
    any4 = listeners.listen("0.0.0.0")
    any6 = listeners.listen("::")
    own = {a: listeners.listen(a.split("%")[0]) for a in addresses if "%" not in a}
    allowed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    allowed.bind((outside, 0))
    allowed.listen(4)
    allowed_port = allowed.getsockname()[1]
    allowed_hits: list[str] = []

    def accept_allowed() -> None:
        while True:
            try:
                conn, peer = allowed.accept()
            except OSError:
                return
            allowed_hits.append(peer[0])
            conn.close()

    threading.Thread(target=accept_allowed, daemon=True).start()
    monkeypatch.setenv(HOST_ALLOW_ENV, format_allowance(outside, allowed_port))

    async def body() -> dict[str, dict[str, object]]:
        env = make_env()
        await env.start(force_build=False)
        later_added = False
        try:
            # After the start: the watcher must block an address that appears now.
            later_added = (
                subprocess.run(["ip", "addr", "add", f"{LATER}/32", "dev", "lo"]).returncode == 0
            )
            targets: list[list[object]] = []
            if later_added:
                own[LATER] = listeners.listen(LATER)
                addresses.append(LATER)
                await asyncio.sleep(1)
            for address in addresses:
                wildcard = any6 if ":" in address else any4
                ports = [wildcard] + ([own[address]] if address in own else [])
                targets += [[proto, address, p] for proto in ("tcp", "udp") for p in ports]
            targets += [["udp", b, any4] for b in broadcasts]
            targets.append(["tcp", outside, allowed_port])
            await env.upload_file(PROBE, "/tmp/probe.py")
            command = f"python3 /tmp/probe.py {shlex.quote(json.dumps(targets))}"
            results = {}
            for user in ("nobody", "root"):
                result = await env.exec(command, user=user, timeout_sec=120)
                assert result.return_code == 0, result.stderr
                results[user] = json.loads(result.stdout or "{}")
            await asyncio.sleep(1)  # late datagrams
            return results
        finally:
            await env.stop(delete=True)
            if later_added:
                subprocess.run(["ip", "addr", "del", f"{LATER}/32", "dev", "lo"])

    try:
        results = run(body())
    finally:
        listeners.close()
        allowed.close()
    control = f"tcp {outside} {allowed_port} "
    opened = []
    for user, outcome in results.items():
        undo = outcome.pop("undo")
        assert isinstance(undo, dict) and 0 not in undo.values(), (user, undo)
        # The control: the sandbox's network works, and reaches the allowed port.
        assert outcome[control + "plain"] == "open", (user, outcome)
        opened += [
            f"{user}: {k}" for k, v in outcome.items() if v == "open" and not k.startswith(control)
        ]
    assert allowed_hits, "the allowed port saw no connection"
    # Nothing connected, and no listener (TCP or UDP) heard from the sandbox.
    assert (opened, listeners.hits) == ([], []), (opened, listeners.hits)
    assert LATER in addresses, "the later address could not be added (needs root)"
