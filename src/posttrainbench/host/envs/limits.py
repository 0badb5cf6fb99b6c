"""CPU and memory limits for a sandbox instance through cgroups (v2, else v1).

Every process of an instance (the bwrap init and each exec) is placed in one cgroup per
controller before it execs, so descendants inherit the limits. Where no writable cgroup
hierarchy with the cpu and memory controllers exists, limits are not enforced and a
warning says so; ``rlimit``-style caps are deliberately not used (RLIMIT_AS breaks CUDA
and JIT runtimes that reserve large address ranges).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_CPU_PERIOD_US = 100_000


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def detect_cgroup_mode(root: Path = CGROUP_ROOT) -> str | None:
    """Return ``"v2"``, ``"v1"`` or ``None`` (no writable cpu+memory hierarchy)."""
    controllers = root / "cgroup.controllers"
    if controllers.is_file() and _writable(root):
        available = controllers.read_text().split()
        if "cpu" in available and "memory" in available:
            return "v2"
    if _writable(root / "memory") and _writable(root / "cpu"):
        return "v1"
    return None


class CgroupLimits:
    """One instance's cgroups; ``argv_prefix`` moves a command into them before exec."""

    def __init__(
        self,
        name: str,
        cpus: float | None,
        memory_mb: int | None,
        logger: logging.Logger,
        root: Path = CGROUP_ROOT,
    ) -> None:
        self.name = name
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.logger = logger
        self.root = root
        self.mode = detect_cgroup_mode(root)
        self.dirs: list[Path] = []

    def create(self) -> bool:
        """Create the cgroups and write the limits; return whether they are enforced."""
        if self.cpus is None and self.memory_mb is None:
            return False
        if self.mode is None:
            self.logger.warning(
                "No writable cgroup hierarchy: CPU/memory limits are NOT enforced "
                "(requested cpus=%s, memory_mb=%s)",
                self.cpus,
                self.memory_mb,
            )
            return False
        host_cpus = os.cpu_count() or 1
        # A task written for a bigger machine still runs: cap at what the host has.
        cpus = min(float(self.cpus), host_cpus) if self.cpus else None
        memory = self.memory_mb * 1024 * 1024 if self.memory_mb else None
        try:
            if self.mode == "v2":
                self._create_v2(cpus, memory)
            else:
                self._create_v1(cpus, memory)
        except OSError as exc:
            self.logger.warning("cgroup limits NOT enforced: %s", exc)
            self.remove()
            return False
        self.logger.debug("cgroup %s limits: cpus=%s memory=%s", self.mode, cpus, memory)
        return True

    def _create_v2(self, cpus: float | None, memory: int | None) -> None:
        parent = self.root / "ptb"
        parent.mkdir(exist_ok=True)
        (self.root / "cgroup.subtree_control").write_text("+cpu +memory")
        (parent / "cgroup.subtree_control").write_text("+cpu +memory")
        group = parent / self.name
        group.mkdir(exist_ok=True)
        self.dirs = [group]
        if cpus:
            (group / "cpu.max").write_text(f"{int(cpus * _CPU_PERIOD_US)} {_CPU_PERIOD_US}")
        if memory:
            (group / "memory.max").write_text(str(memory))

    def _create_v1(self, cpus: float | None, memory: int | None) -> None:
        cpu_group = self.root / "cpu" / "ptb" / self.name
        mem_group = self.root / "memory" / "ptb" / self.name
        cpu_group.mkdir(parents=True, exist_ok=True)
        mem_group.mkdir(parents=True, exist_ok=True)
        self.dirs = [cpu_group, mem_group]
        if cpus:
            (cpu_group / "cpu.cfs_period_us").write_text(str(_CPU_PERIOD_US))
            (cpu_group / "cpu.cfs_quota_us").write_text(str(int(cpus * _CPU_PERIOD_US)))
        if memory:
            (mem_group / "memory.limit_in_bytes").write_text(str(memory))

    def argv_prefix(self) -> list[str]:
        """A shell prefix that joins the cgroups, then execs the rest of the argv."""
        return join_cgroups_prefix(self.dirs)

    def pids(self) -> set[int]:
        """Pids currently in the instance's cgroups (a safety net for stop())."""
        found: set[int] = set()
        for directory in self.dirs:
            try:
                text = (directory / "cgroup.procs").read_text()
            except OSError:
                continue
            found.update(int(pid) for pid in text.split())
        return found

    def remove(self) -> None:
        """Remove the (empty) cgroups; errors are logged, not raised."""
        for directory in self.dirs:
            try:
                directory.rmdir()
            except OSError as exc:
                self.logger.debug("could not remove cgroup %s: %s", directory, exc)
        self.dirs = []


def join_cgroups_prefix(dirs: list[Path]) -> list[str]:
    """A shell prefix that moves itself into each cgroup dir in turn, then execs the rest of the argv.

    Joining before the exec means every descendant is born inside; a failed join fails
    the command rather than running it outside.
    """
    if not dirs:
        return []
    joins = " && ".join(f'echo $$ > "{d}/cgroup.procs"' for d in dirs)
    return ["sh", "-c", f'{joins} && exec "$@"', "ptb-cgroup"]
