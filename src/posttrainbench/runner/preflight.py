"""Checks that fail fast, with one clear line, before any slow step."""

from __future__ import annotations

from shutil import which

from posttrainbench.errors import RunError


def check_local_sandbox() -> None:
    """The local sandbox needs bubblewrap."""
    if which("bwrap") is None:
        raise RunError("bubblewrap (bwrap) is not installed; run `make demo` or `apt-get install bubblewrap`")
