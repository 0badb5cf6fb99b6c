"""Live progress of a running trial's verifier, read from the host while the job runs.

The verifier keeps ``/logs/verifier/progress.json`` up to date
(``posttrainbench.task.evaluation.progress``). On the local sandbox that file lives in the
verifier instance's root under the trial dir
(``<trial>/sandbox/<trial>__verifier__<key>/rootfs/logs/verifier/``); where Harbor mounts
the log dirs (Docker) it is ``<trial>/verifier/progress.json``. Trial dirs hold what
untrusted code wrote, so every read goes through :mod:`posttrainbench.core.safe_fs` (no link
followed, size capped), and what is read is display only: never a score.
"""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.task.schemas import PROGRESS_FILENAME, VerifierProgress

MAX_PROGRESS_BYTES = 4096
VERIFIER_SESSION_MARK = (
    "__verifier"  # Harbor names a separate verifier's session <trial>__verifier__<key>
)
POLL_S = 2.0


def log_candidates(job: SafeDir, logs: str, name: str) -> list[str]:
    """Paths below a job dir where a running trial's `/logs/<logs>/<name>` may be: the
    trial's own `<logs>/` (where Harbor mounts it) and the root of each local-sandbox
    instance of that side (the verifier's instances for `verifier`, the others for
    `agent`)."""
    verifier = logs == "verifier"
    found: list[str] = []
    for trial, st in job.entries():
        if not stat.S_ISDIR(st.st_mode):
            continue
        found.append(f"{trial}/{logs}/{name}")
        if job.is_dir(f"{trial}/sandbox"):
            found.extend(
                f"{trial}/sandbox/{instance}/rootfs/logs/{logs}/{name}"
                for instance, _ in job.entries(f"{trial}/sandbox")
                if (VERIFIER_SESSION_MARK in instance) == verifier
            )
    return found


def read_verifier_progress(job_dir: Path) -> VerifierProgress | None:
    """The most recently written verifier progress under *job_dir*; None when there is none (yet)."""
    try:
        job = SafeDir.open(job_dir)
    except OSError:
        return None
    with job:
        try:
            candidates = log_candidates(job, "verifier", PROGRESS_FILENAME)
        except OSError:
            return None
        newest: tuple[float, VerifierProgress] | None = None
        for relative in candidates:
            st = job.lstat(relative)
            if st is None or not stat.S_ISREG(st.st_mode) or (newest and st.st_mtime <= newest[0]):
                continue
            try:
                state = VerifierProgress.model_validate_json(
                    job.read_bytes(relative, MAX_PROGRESS_BYTES)
                )
            except (OSError, ValidationError, ValueError):
                continue  # a link, an oversized or half-understood file: nothing to show
            newest = (st.st_mtime, state)
        return newest[1] if newest else None


async def watch_verifier(
    job_dir: Path, on_progress: Callable[[VerifierProgress], None], poll_s: float = POLL_S
) -> None:
    """Call *on_progress* with each new verifier progress under *job_dir*, until cancelled."""
    last: VerifierProgress | None = None
    while True:
        state = await asyncio.to_thread(read_verifier_progress, job_dir)
        if state is not None and state != last:
            on_progress(state)
            last = state
        await asyncio.sleep(poll_s)
