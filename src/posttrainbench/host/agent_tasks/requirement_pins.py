"""Exact pins of installed distributions and everything they require (for a task's venv).

A Mode B agent task runs Harbor inside its environment; its venv must hold the Harbor this
machine compiled it with, and the same versions of everything Harbor needs, so a task built
today builds the same venv next month. The pins are read from this interpreter's installed
distributions (markers evaluated here: the task's interpreter is the same minor version).
"""

from __future__ import annotations

from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from posttrainbench.core.errors import PtbError


class MissingDistributionError(PtbError):
    """A distribution to pin is not installed here."""


def pinned_closure(roots: list[str]) -> list[str]:
    """``name==version`` of *roots* and their requirements (extras followed), sorted by name."""
    versions: dict[str, str] = {}
    pending: list[tuple[str, frozenset[str]]] = [(Requirement(r).name, frozenset()) for r in roots]
    done: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        key = (canonicalize_name(name), extras)
        if key in done:
            continue
        done.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError as exc:
            raise MissingDistributionError(
                f"{name} is not installed in this Python ({exc}): cannot pin it"
            ) from exc
        versions[key[0]] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            wanted = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in wanted):
                continue
            pending.append((req.name, frozenset(req.extras)))
    return [f"{name}=={versions[name]}" for name in sorted(versions)]
