"""What a task carries of this package: whole zones, never a list of files.

The zones (docs/architecture.md) say where code runs, and the import contracts in
pyproject.toml keep each zone's imports inside it and the zones below it, so copying a
zone whole ships everything it needs and nothing of the host.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

import posttrainbench

CORE = "core"
TASK = "task"
SERVICE = "service"
HOST = "host"
MODEL_TASK_ZONES = (CORE, TASK)
AGENT_TASK_ZONES = (CORE, SERVICE)
# The one exception to "a task carries its zones": Mode B's nested Harbor jobs inside the
# task load the local sandbox plugin, a host module (and what it imports), so a Mode B
# task carries the whole package.
MODE_B_PLUGIN = "posttrainbench.host.envs.local_sandbox"
MODE_B_ZONES = (CORE, TASK, SERVICE, HOST)
_ALWAYS_SKIPPED = ("__pycache__",)


def package_root() -> Path:
    """Directory of the installed ``posttrainbench`` package."""
    return Path(str(resources.files(posttrainbench)))


def copy_zones(
    lib: Path,
    zones: Iterable[str],
    ignore: Callable[[str, list[str]], set[str]] | None = None,
) -> Path:
    """Copy the package's ``__init__.py`` and each of *zones* whole into
    ``lib/posttrainbench/``; *ignore* drops more names (``shutil.copytree``'s hook).
    Returns the copied package's directory."""
    root = package_root()
    dest = lib / "posttrainbench"
    dest.mkdir(parents=True)
    shutil.copyfile(root / "__init__.py", dest / "__init__.py")

    def skip(directory: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in _ALWAYS_SKIPPED or n.endswith(".pyc")}
        return skipped | (ignore(directory, names) if ignore else set())

    for zone in zones:
        shutil.copytree(root / zone, dest / zone, ignore=skip)
    return dest
