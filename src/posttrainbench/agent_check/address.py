"""The address a sandbox reaches this machine at (never loopback, which sandboxes lack)."""

from __future__ import annotations

import socket

from posttrainbench.errors import PtbError

# A documentation-only address (RFC 5737): connecting a UDP socket sends nothing, it only
# makes the kernel pick the interface that outbound traffic would leave by.
_PROBE = ("192.0.2.1", 9)


def reachable_host_address() -> str:
    """This machine's address on its outbound interface; the sandboxes' user-mode network
    (and Docker's bridge) route to it, unlike to 127.0.0.1."""
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
