"""Following the agent's own log of a running trial from the host (the demo's training lines)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from posttrainbench.host.runner.agent_log import read_agent_log, watch_agent_log


def _instance_log(job: Path, instance: str) -> Path:
    log = job / "t__1" / "sandbox" / instance / "rootfs" / "logs" / "agent" / "oracle.txt"
    log.parent.mkdir(parents=True)
    return log


def test_the_agent_instances_log_is_read_and_the_verifiers_is_not(tmp_path: Path) -> None:
    job = tmp_path / "job"
    log = _instance_log(job, "t__1__env")
    log.write_text("step 2 loss 0.91 30s\nstep 4 loss 0.5")  # the last line is still being written
    other = _instance_log(job, "t__1__verifier__abc")
    other.write_text("not the agent's\n")
    os.utime(other, (log.stat().st_mtime + 10,) * 2)
    assert read_agent_log(job, "oracle.txt") == ["step 2 loss 0.91 30s"]


def test_a_link_planted_for_the_log_is_not_followed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    secret = tmp_path / "host-secret.txt"
    secret.write_text("token\n")
    log = _instance_log(job, "t__1__env")
    log.symlink_to(secret)
    assert read_agent_log(job, "oracle.txt") == []


def test_each_new_line_is_heard_once(tmp_path: Path) -> None:
    job = tmp_path / "job"
    log = _instance_log(job, "t__1__env")
    heard: list[str] = []

    async def scenario() -> None:
        watcher = asyncio.create_task(watch_agent_log(job, "oracle.txt", heard.append, 0.05))
        log.write_text("step 2 loss 0.9 10s\n")
        await asyncio.sleep(0.3)
        log.write_text("step 2 loss 0.9 10s\nstep 4 loss 0.7 20s\n")
        await asyncio.sleep(0.3)
        # Harbor copies the log into the trial's agent/ at the end: the same lines again.
        copied = job / "t__1" / "agent" / "oracle.txt"
        copied.parent.mkdir()
        copied.write_text(log.read_text())
        await asyncio.sleep(0.3)
        watcher.cancel()

    asyncio.run(scenario())
    assert heard == ["step 2 loss 0.9 10s", "step 4 loss 0.7 20s"]
