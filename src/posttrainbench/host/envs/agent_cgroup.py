"""The cgroup that holds every process an unprivileged user starts in a sandbox instance.

Each exec that runs as a user other than root joins this cgroup before it execs, so every
process it starts (a daemon that double-forks, calls ``setsid`` or ignores SIGTERM
included) is a member: membership is inherited and an unprivileged process cannot leave
(the sandbox has no cgroup filesystem). At the agent's deadline :meth:`AgentCgroup.kill`
stops them all at once: cgroup v2's ``cgroup.kill`` (the kernel kills the whole subtree
and refuses forks meanwhile), else the v1 freezer (freeze, SIGKILL each member, thaw).

The cgroup v2 hierarchy is ``/sys/fs/cgroup`` itself or, on a hybrid host, its
``unified`` mount; it needs no controllers. Without either, the v1 freezer is used; with
none writable, nothing is created and the in-sandbox ``stop_agent.sh`` (killing by uid)
remains the only stop.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Literal

from posttrainbench.host.envs.limits import CGROUP_ROOT

AGENT_GROUP_PARENT = "ptb-agent"
CgroupMode = Literal["v2", "v1"]


def v2_hierarchy(root: Path = CGROUP_ROOT) -> Path | None:
    """The writable cgroup v2 mount: ``root`` (pure v2) or ``root/unified`` (hybrid)."""
    for candidate in (root, root / "unified"):
        if (candidate / "cgroup.controllers").is_file() and os.access(candidate, os.W_OK):
            return candidate
    return None


def _v1_freezer(root: Path = CGROUP_ROOT) -> Path | None:
    freezer = root / "freezer"
    if (freezer / "cgroup.procs").is_file() and os.access(freezer, os.W_OK):
        return freezer
    return None


class AgentCgroup:
    """One instance's cgroup for the processes of its unprivileged users.

    ``v2_parent`` puts the group under an existing v2 cgroup (the instance's limits
    group on a pure-v2 host) so that its CPU and memory limits still apply.
    """

    def __init__(
        self,
        name: str,
        logger: logging.Logger,
        root: Path = CGROUP_ROOT,
        v2_parent: Path | None = None,
        mode: CgroupMode | None = None,
    ) -> None:
        self.logger = logger
        self.mode: CgroupMode | None = None
        self.dir: Path | None = None
        v2 = v2_hierarchy(root)
        freezer = _v1_freezer(root)
        if mode in (None, "v2") and v2 is not None:
            self.mode = "v2"
            self._path = (
                v2_parent / "agent" if v2_parent is not None else v2 / AGENT_GROUP_PARENT / name
            )
        elif mode in (None, "v1") and freezer is not None:
            self.mode = "v1"
            self._path = freezer / AGENT_GROUP_PARENT / name

    def create(self) -> bool:
        """Create the cgroup; False (with a warning) where no hierarchy is writable."""
        if self.mode is None:
            self.logger.warning(
                "no writable cgroup hierarchy: the agent's processes are stopped "
                "by uid only (stop_agent.sh in the collect hook)"
            )
            return False
        try:
            self._path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.logger.warning("cannot create the agent cgroup %s: %s", self._path, exc)
            return False
        self.dir = self._path
        return True

    def pids(self) -> set[int]:
        """Pids now in the cgroup."""
        if self.dir is None:
            return set()
        try:
            return {int(pid) for pid in (self.dir / "cgroup.procs").read_text().split()}
        except OSError:
            return set()

    def kill(self, timeout_sec: float = 10.0) -> bool:
        """Stop every member at once and wait until none is left; True when the cgroup is empty."""
        if self.dir is None:
            return True
        try:
            if self.mode == "v2" and (self.dir / "cgroup.kill").is_file():
                (self.dir / "cgroup.kill").write_text("1")
            elif self.mode == "v2":
                self._freeze_kill_thaw(self.dir / "cgroup.freeze", "1", "0")
            else:
                self._freeze_kill_thaw(self.dir / "freezer.state", "FROZEN", "THAWED")
        except OSError as exc:
            self.logger.warning("stopping the agent cgroup %s failed: %s", self.dir, exc)
        deadline = time.monotonic() + timeout_sec
        while self.pids():
            if time.monotonic() > deadline:
                self.logger.warning(
                    "agent processes %s outlived their cgroup's kill", sorted(self.pids())
                )
                return False
            for pid in self.pids():  # anything that slipped in meanwhile
                _sigkill(pid)
            time.sleep(0.02)
        return True

    def _freeze_kill_thaw(self, state: Path, frozen: str, thawed: str) -> None:
        # Frozen members cannot fork or run, so the list read below is complete; SIGKILL
        # is delivered when they thaw.
        state.write_text(frozen)
        try:
            for pid in self.pids():
                _sigkill(pid)
        finally:
            state.write_text(thawed)

    def remove(self) -> None:
        """Kill what is left and remove the cgroup (errors are logged, not raised)."""
        if self.dir is None:
            return
        self.kill(timeout_sec=5.0)
        try:
            self.dir.rmdir()
        except OSError as exc:
            self.logger.debug("could not remove agent cgroup %s: %s", self.dir, exc)
        self.dir = None


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
