"""The ownership and mode sweep of the audit: every protected path is root's and no one
else's to change (nor, for private ones, to read), and no candidate uid left a file.

Run only once nothing untrusted is running (the verifier quiesces first), so nothing can
change a tree while it is walked; it only ``lstat``s and never follows a link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.agent_task_layout import TaskLayout

MAX_ENTRIES = 200000  # a sweep stops here (and says so): a planted tree cannot make it hang


class Deviation(BaseModel):
    """One thing the audit found that must not be."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    path: str
    detail: str


class ProtectedTree(BaseModel):
    """A tree that must be root's; ``private``: nobody else may even read or enter it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    private: bool = False


def _walk(root: str) -> Iterator[tuple[str, os.stat_result]]:
    try:
        info = os.lstat(root)
    except OSError:
        return
    yield root, info
    if not stat.S_ISDIR(info.st_mode):
        return
    for current, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = os.path.join(current, name)
            try:
                yield path, os.lstat(path)
            except OSError:
                continue


def check_tree(tree: ProtectedTree, limit: int = MAX_ENTRIES) -> tuple[int, list[Deviation]]:
    """(entries checked, deviations) of one protected tree."""
    found: list[Deviation] = []
    count = 0
    for path, info in _walk(tree.path):
        count += 1
        if count > limit:
            found.append(
                Deviation(kind="sweep_limit", path=tree.path, detail=f"more than {limit} entries")
            )
            break
        if info.st_uid != 0:
            found.append(
                Deviation(kind="owner", path=path, detail=f"owned by uid {info.st_uid}, not root")
            )
        if stat.S_ISLNK(info.st_mode):
            continue  # a link's own mode means nothing; its owner is checked above
        mode = stat.S_IMODE(info.st_mode)
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            found.append(
                Deviation(kind="mode", path=path, detail=f"mode {mode:o}: writable by others")
            )
        if tree.private and path == tree.path and mode & 0o077:
            found.append(
                Deviation(kind="mode", path=path, detail=f"mode {mode:o}: others may enter it")
            )
    return count, found


def leftovers(roots: list[str], uids: set[int], limit: int = MAX_ENTRIES) -> list[Deviation]:
    """Files owned by any of *uids* (finished candidate runs) under *roots*: none may remain."""
    found: list[Deviation] = []
    if not uids:
        return found
    count = 0
    for root in roots:
        for path, info in _walk(root):
            count += 1
            if count > limit:
                return found + [
                    Deviation(kind="sweep_limit", path=root, detail=f"more than {limit} entries")
                ]
            if info.st_uid in uids:
                found.append(
                    Deviation(
                        kind="leftover",
                        path=path,
                        detail=f"left by candidate uid {info.st_uid} after its run ended",
                    )
                )
    return found


def protected_trees(layout: TaskLayout) -> list[ProtectedTree]:
    """The trees of a compiled agent task the audit sweeps."""
    return [
        ProtectedTree(path=layout.state, private=True),
        ProtectedTree(path=layout.private, private=True),
        ProtectedTree(path=layout.secrets_dir, private=True),
        ProtectedTree(path=layout.service_root),
        ProtectedTree(path=layout.runs_root),
        ProtectedTree(path=layout.lib),
        ProtectedTree(path=layout.venv),
        ProtectedTree(path=layout.tests),
        ProtectedTree(path=layout.verifier_out),
    ]


def run_dirs_left(runs_root: str) -> list[Deviation]:
    """Run directories that outlived their run (each is deleted when its run ends)."""
    try:
        names = sorted(os.listdir(runs_root))
    except OSError:
        return []
    return [
        Deviation(
            kind="leftover",
            path=str(Path(runs_root) / n),
            detail="a run directory outlived its run",
        )
        for n in names
    ]
