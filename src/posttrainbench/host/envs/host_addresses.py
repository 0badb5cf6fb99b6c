"""The host's own addresses, out of reach of a sandbox's network.

slirp4netns (:mod:`posttrainbench.host.envs.user_net`) makes a sandbox's connections through
ordinary sockets of the host, so a connection to any address the host has (its LAN
address, a Docker bridge's, a VPN's, a broadcast address) reaches the host's own services:
every listener on ``0.0.0.0`` or on an address beyond loopback. Its
``--disable-host-loopback`` only closes the gateway 10.0.2.2.

So before slirp4netns starts, the harness (root of the sandbox's network namespace,
through ``nsenter``) routes every destination the host's kernel delivers to itself (its
local routing tables, every table: types ``local`` and ``broadcast``, IPv6 ``anycast``) to
``prohibit`` in a table of its own, :data:`BLOCK_TABLE`, which a policy rule consults
before the main table: ``connect()`` and ``sendto()`` then fail at once with EACCES.
Nothing in the sandbox can undo it: root there keeps no CAP_NET_ADMIN and the agent has
no capability at all (a namespace it makes of its own has no network). A watcher
(``ip monitor route``) blocks the addresses the host gains later (an interface that comes
up, a VPN) as soon as the kernel announces them; the short delay between the two is the
one gap. Loopback is left out: 127.0.0.0/8 and ::1 in a sandbox are its own.

A socket bound to tap0 (``SO_BINDTODEVICE``, ``IP_UNICAST_IF``) makes the kernel treat a
destination whose route is ``prohibit`` as on the link; its ARP request then goes
unanswered, since slirp answers only for its own 10.0.2.x addresses, so nothing is sent
(``tests/security/test_sandbox_host_addresses.py`` tries it). IPv6 never leaves the
sandbox at all: slirp4netns runs without ``--enable-ipv6``; the IPv6 blocks are a second
line.

The one way through is an explicit allowance, set by trusted code in the harness's
environment (:data:`HOST_ALLOW_ENV`): TCP endpoints of the host, each a policy rule before
the block. ``ptb agents check`` uses it for its scripted model.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.host.envs.bwrap import HOST_HELPER_ENV

IP = "ip"
# A routing table and rule preferences no distribution uses (0, 32766, 32767 are the
# kernel's local, main and default).
BLOCK_TABLE = 7411
ALLOW_RULE_PREF = 100
BLOCK_RULE_PREF = 200
HOST_ALLOW_ENV = "PTB_SANDBOX_HOST_ALLOW"
# What the host delivers to itself, per address family.
_SELF_TYPES: dict[int, tuple[str, ...]] = {4: ("local", "broadcast"), 6: ("local", "anycast")}
_IPV6 = Path("/proc/net/if_inet6")  # absent when the kernel runs without IPv6

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class HostAddressError(RuntimeError):
    """The host's addresses could not be read or blocked, or an allowance is malformed."""


@dataclass(frozen=True)
class HostEndpoint:
    """A TCP endpoint of the host that sandboxes may reach (an explicit allowance)."""

    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int

    def rule(self) -> str:
        """The ``ip rule`` that lets TCP to this endpoint skip the block."""
        return (
            f"rule add pref {ALLOW_RULE_PREF} to {self.address}/{self.address.max_prefixlen} "
            f"ipproto tcp dport {self.port} lookup main"
        )


def format_allowance(host: str, port: int) -> str:
    """The :data:`HOST_ALLOW_ENV` item for ``host:port`` (IPv6 in brackets)."""
    address = ipaddress.ip_address(host)
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def parse_allowances(value: str) -> list[HostEndpoint]:
    """Parse :data:`HOST_ALLOW_ENV`: comma-separated ``ADDRESS:PORT`` (``[IPV6]:PORT``)."""
    endpoints = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, _, port = item.rpartition(":")
        try:
            address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
            number = int(port)
        except ValueError:
            number = 0
        if not 0 < number < 65536:
            raise HostAddressError(f"{HOST_ALLOW_ENV}: {item!r} is not ADDRESS:PORT")
        endpoints.append(HostEndpoint(address, number))
    return endpoints


def _families() -> tuple[int, ...]:
    return (4, 6) if _IPV6.exists() else (4,)


def host_networks() -> set[Network]:
    """Every destination this machine's kernel delivers to itself, loopback left out."""
    found: set[Network] = set()
    for family in _families():
        for kind in _SELF_TYPES[family]:
            argv = [IP, "-j", f"-{family}", "route", "show", "table", "all", "type", kind]
            done = subprocess.run(
                argv, capture_output=True, text=True, env=HOST_HELPER_ENV, check=False
            )
            if done.returncode != 0:
                raise HostAddressError(
                    f"could not read this host's addresses ({' '.join(argv)}): "
                    f"{done.stderr.strip()}"
                )
            for route in json.loads(done.stdout or "[]"):
                network = ipaddress.ip_network(route["dst"], strict=False)
                if not network.is_loopback:
                    found.add(network)
    return found


def block_batches(
    networks: set[Network], allowances: list[HostEndpoint], first: bool
) -> dict[int, list[str]]:
    """``ip -batch`` lines per family: the prohibit routes, and (``first``) the rules."""
    batches: dict[int, list[str]] = {}
    for family in _families():
        lines = [
            f"route replace prohibit {network} table {BLOCK_TABLE}"
            for network in sorted(networks, key=str)
            if network.version == family
        ]
        if first:
            lines += [e.rule() for e in allowances if e.address.version == family]
            # Also without an address yet: the watcher's later routes need the rule.
            lines.append(f"rule add pref {BLOCK_RULE_PREF} lookup {BLOCK_TABLE}")
        if lines:
            batches[family] = lines
    return batches


class HostAddressGuard:
    """Keeps one sandbox's network namespace from every address of this host."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._netns: list[str] = []
        self._blocked: set[Network] = set()
        self._monitor: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, netns_pid: int, user_namespace: bool = False) -> None:
        """Block the host's addresses in the network namespace of ``netns_pid``, then keep
        blocking those it gains. ``user_namespace``: that namespace is owned by the
        instance's user namespace (a nested instance), which nsenter joins first."""
        joins = ["--user", "--net"] if user_namespace else ["--net"]
        self._netns = ["nsenter", "--target", str(netns_pid), *joins, "--"]
        allowances = parse_allowances(os.environ.get(HOST_ALLOW_ENV, ""))
        # The watcher first: an address added while the first set is read is not missed.
        self._monitor = await asyncio.create_subprocess_exec(
            "setpriv",
            "--pdeathsig",
            "KILL",  # never outlives the harness
            "--",
            IP,
            "-o",
            "monitor",
            "route",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=HOST_HELPER_ENV,
        )
        try:
            networks = await asyncio.to_thread(host_networks)
            await self._apply(block_batches(networks, allowances, first=True))
        except BaseException:
            await self.stop()
            raise
        self._blocked = networks
        self._task = asyncio.create_task(self._watch())

    async def _apply(self, batches: dict[int, list[str]]) -> None:
        for family, lines in batches.items():
            proc = await asyncio.create_subprocess_exec(
                *self._netns,
                IP,
                f"-{family}",
                "-batch",
                "-",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=HOST_HELPER_ENV,
            )
            out, _ = await proc.communicate(("\n".join(lines) + "\n").encode())
            if proc.returncode != 0:
                raise HostAddressError(
                    "could not keep the host's addresses out of the sandbox's network: "
                    + out.decode(errors="replace").strip()[-1000:]
                )

    async def _watch(self) -> None:
        assert self._monitor is not None and self._monitor.stdout is not None
        async for line in self._monitor.stdout:
            # `local 192.0.2.7 dev eth0 table local ...`; removals start with `Deleted`.
            if line.split(maxsplit=1)[:1] not in ([b"local"], [b"broadcast"], [b"anycast"]):
                continue
            try:
                networks = await asyncio.to_thread(host_networks)
                new = networks - self._blocked
                if new:
                    await self._apply(block_batches(new, [], first=False))
                    self._blocked |= new
                    self.logger.info("blocked the host's new addresses %s", sorted(map(str, new)))
            except (HostAddressError, OSError, ValueError) as exc:
                self.logger.error("a new address of the host may be reachable: %s", exc)
        self.logger.error("the host address watcher exited; new host addresses stay open")

    async def stop(self) -> None:
        """End the watcher (the blocks go with the namespace)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        proc, self._monitor = self._monitor, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
