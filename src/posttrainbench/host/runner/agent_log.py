"""The agent's own log of a running trial, followed from the host for display (`ptb demo`).

Where the verifier's progress is (:mod:`verifier_progress`), the agent's log is too: in
the agent instance's root on the local sandbox
(``<trial>/sandbox/<trial>__<key>/rootfs/logs/agent/<name>``), or ``<trial>/agent/<name>``
where Harbor mounts the log dirs (Docker). The agent wrote it, so it is read through
:mod:`posttrainbench.core.safe_fs` (no link followed, size capped) and only ever shown.
"""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Callable
from pathlib import Path

from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.host.runner.verifier_progress import POLL_S, log_candidates

MAX_LOG_BYTES = 1 << 20  # the head that is followed: a fine-tune's log is a few KB


def read_agent_log(job_dir: Path, name: str) -> list[str]:
    """The complete lines of the newest agent log *name* under *job_dir* ([] when none yet)."""
    try:
        job = SafeDir.open(job_dir)
    except OSError:
        return []
    with job:
        try:
            candidates = log_candidates(job, "agent", name)
        except OSError:
            return []
        newest: tuple[float, str] | None = None
        for relative in candidates:
            st = job.lstat(relative)
            if st is not None and stat.S_ISREG(st.st_mode):
                if newest is None or st.st_mtime > newest[0]:
                    newest = (st.st_mtime, relative)
        if newest is None:
            return []
        try:
            data, _more = job.read_head(newest[1], MAX_LOG_BYTES)
        except OSError:  # a link or a FIFO planted there: nothing to show
            return []
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    return text.split("\n")[:-1]  # the last piece is a line still being written


async def watch_agent_log(
    job_dir: Path, name: str, on_line: Callable[[str], None], poll_s: float = POLL_S
) -> None:
    """Call *on_line* with each new line of the agent's log *name*, until cancelled."""
    seen = 0
    while True:
        lines = await asyncio.to_thread(read_agent_log, job_dir, name)
        if len(lines) < seen:  # copied back over the instance's copy: the same lines again
            seen = len(lines)
        for line in lines[seen:]:
            on_line(line)
        seen = max(seen, len(lines))
        await asyncio.sleep(poll_s)
