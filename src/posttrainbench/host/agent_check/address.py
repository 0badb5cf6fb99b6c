"""The address a sandbox reaches this machine at (never loopback, which sandboxes lack).

Local sandboxes reach no address of this machine unless allowed
(:mod:`posttrainbench.host.envs.host_addresses`): the check allows its scripted model's port only.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from posttrainbench.core.errors import PtbError
from posttrainbench.host.envs.host_addresses import HOST_ALLOW_ENV, format_allowance

# A documentation-only address (RFC 5737): connecting a UDP socket sends nothing, it only
# makes the kernel pick the interface that outbound traffic would leave by.
_PROBE = ("192.0.2.1", 9)


def reachable_host_address() -> str:
    """This machine's address on its outbound interface; Docker's bridge routes to it, and
    the local sandboxes' user-mode network does for an allowed port (:func:`sandbox_allowance`),
    unlike to 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(_PROBE)
            address = probe.getsockname()[0]
        except OSError as exc:
            raise PtbError(
                f"this machine has no outbound network interface for the scripted model: {exc}"
            ) from exc
    if address.startswith("127.") or address == "0.0.0.0":
        raise PtbError("this machine has only a loopback address; sandboxes cannot reach it")
    return address


def sandbox_allowance(url: str) -> dict[str, str]:
    """The harness environment that lets local sandboxes reach ``url``'s TCP port on this
    machine, and nothing else of it."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise PtbError(f"not a host:port URL: {url!r}")
    return {HOST_ALLOW_ENV: format_allowance(parts.hostname, parts.port)}
