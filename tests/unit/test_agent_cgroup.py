"""The agent cgroup, both kinds this host may offer (real cgroups, real processes)."""

from __future__ import annotations

import logging
import os
import subprocess
import time
import uuid

import pytest

from posttrainbench.host.envs.agent_cgroup import AgentCgroup
from posttrainbench.host.envs.limits import join_cgroups_prefix

# A daemon that leaves its session, double-forks and ignores SIGTERM/SIGHUP.
DAEMON = (
    "( trap '' TERM HUP; setsid bash -c \"trap '' TERM HUP; while true; do sleep 0.05; done\" & ); "
    "nohup sleep 300 > /dev/null 2>&1 &"
)


@pytest.mark.parametrize("mode", ["v2", "v1"])
def test_kill_takes_every_member_however_it_detached(mode: str) -> None:
    group = AgentCgroup(f"test-{uuid.uuid4().hex[:8]}", logging.getLogger("test"), mode=mode)  # type: ignore[arg-type]
    if group.mode != mode or not group.create():
        pytest.skip(f"no writable cgroup {mode} hierarchy here")
    try:
        assert group.dir is not None
        subprocess.run(
            [*join_cgroups_prefix([group.dir]), "bash", "-c", DAEMON], check=True, timeout=10
        )
        time.sleep(0.3)
        members = group.pids()
        assert len(members) >= 2, members
        assert group.kill(timeout_sec=10) and group.pids() == set()
        time.sleep(0.2)
        assert all(not os.path.exists(f"/proc/{pid}") or _zombie(pid) for pid in members)
    finally:
        group.remove()
    assert group.dir is None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
