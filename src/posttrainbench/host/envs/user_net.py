"""Outbound network for a sandbox through user-mode networking (slirp4netns).

A sandbox always has its own network namespace: sharing the host's would let it reach
services on the host's loopback and the host's abstract unix sockets. When the task has
network access, ``slirp4netns`` (a host process outside the sandbox) gives that namespace
a ``tap0`` device and NATs its connections through ordinary host sockets, with
``--disable-host-loopback`` so that the gateway (10.0.2.2) does not lead to the host's
127.0.0.1. It runs in its own sandbox (``--enable-sandbox``, ``--enable-seccomp``) and
exits when the pipe it watches (``--exit-fd``) closes, so it cannot outlive the harness.

Its connections are the host's own, so every other address of the host would answer:
before it starts, :mod:`posttrainbench.host.envs.host_addresses` routes each of them to
``prohibit`` inside the sandbox's namespace, and keeps doing so for addresses added later.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path

from posttrainbench.host.envs.bwrap import HOST_HELPER_ENV
from posttrainbench.host.envs.host_addresses import IP, HostAddressGuard

SLIRP4NETNS = "slirp4netns"
# slirp4netns's built-in DNS forwarder, inside the sandbox's network.
SANDBOX_NAMESERVER = "10.0.2.3"
TUN_DEVICE = Path("/dev/net/tun")
_READY_TIMEOUT_SEC = 20


class UserNetworkError(RuntimeError):
    """slirp4netns is missing or did not come up."""


def check_available(nested: bool = False) -> None:
    """Raise with the install command when slirp4netns (or iproute2's ``ip``, which keeps
    the host's addresses out) is not on PATH.

    ``nested``: this harness runs inside an instance, where slirp4netns needs the
    ``/dev/net/tun`` that only a ``nested_sandboxes`` instance is given.
    """
    if shutil.which(SLIRP4NETNS) is None:
        raise UserNetworkError(
            "slirp4netns is not installed: sandboxes with network access need it "
            "(`apt-get install slirp4netns`, or scripts/setup.sh)"
        )
    if shutil.which(IP, path=HOST_HELPER_ENV["PATH"]) is None:
        raise UserNetworkError(
            "iproute2's `ip` is not installed: sandboxes with network access need it to keep "
            "the host's own addresses out of reach (`apt-get install iproute2`)"
        )
    if nested and not TUN_DEVICE.exists():
        raise UserNetworkError(
            f"a sandbox nested in another has network access only through {TUN_DEVICE}, "
            "which this one lacks: the outer task must declare nested_sandboxes "
            "(environment/ptb-environment.json), or the inner one must run without network"
        )


def build_slirp_argv(
    netns_pid: int, ready_fd: int, exit_fd: int, user_namespace: bool = False
) -> list[str]:
    """The slirp4netns command line for the network namespace of ``netns_pid``.

    ``user_namespace`` (a harness without CAP_SYS_ADMIN, inside an instance): slirp4netns
    runs in the instance's user namespace (``nsenter --user``), while its sockets stay in
    this harness's network. As root it never joins that namespace itself, and the mount
    namespace of its own sandbox (``--enable-sandbox``) can only be made there.
    """
    prefix = ["nsenter", "--target", str(netns_pid), "--user", "--"] if user_namespace else []
    return [
        *prefix,
        SLIRP4NETNS,
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--enable-sandbox",
        "--enable-seccomp",
        f"--ready-fd={ready_fd}",
        f"--exit-fd={exit_fd}",
        str(netns_pid),
        "tap0",
    ]


class UserNetwork:
    """One slirp4netns process serving one sandbox's network namespace."""

    def __init__(self, log_path: Path, logger: logging.Logger) -> None:
        self.log_path = log_path
        self.logger = logger
        self._proc: asyncio.subprocess.Process | None = None
        self._exit_write: int | None = None
        self._guard = HostAddressGuard(logger)

    async def start(self, netns_pid: int, user_namespace: bool = False) -> None:
        """Attach to the network namespace of ``netns_pid`` and wait until tap0 is configured.

        ``user_namespace``: that namespace belongs to the instance's own user namespace (a
        nested instance); slirp4netns then runs in it, see :func:`build_slirp_argv`.
        """
        check_available(nested=user_namespace)
        # Before the first packet can flow: the host's addresses are never open.
        await self._guard.start(netns_pid, user_namespace)
        ready_read, ready_write = os.pipe()
        exit_read, exit_write = os.pipe()
        argv = build_slirp_argv(netns_pid, ready_write, exit_read, user_namespace)
        log = self.log_path.open("ab")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(ready_write, exit_read),
                env=HOST_HELPER_ENV,
                start_new_session=True,
            )
        finally:
            log.close()
            os.close(ready_write)
            os.close(exit_read)
        self._exit_write = exit_write
        try:
            ready = await asyncio.wait_for(
                asyncio.to_thread(os.read, ready_read, 1), _READY_TIMEOUT_SEC
            )
        except TimeoutError:
            ready = b""
        finally:
            os.close(ready_read)
        if ready != b"1":
            await self.stop()
            detail = self.log_path.read_text(errors="replace").strip()[-2000:]
            raise UserNetworkError(f"slirp4netns did not configure the sandbox's network: {detail}")

    async def stop(self) -> None:
        """Close its exit pipe (it exits on its own), then make sure it is gone."""
        if self._exit_write is not None:
            os.close(self._exit_write)
            self._exit_write = None
        await self._guard.stop()
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            self.logger.warning("slirp4netns %s did not exit; killing it", proc.pid)
            proc.kill()
            await proc.wait()
