"""Whether a sweep's runner is alive, and how to start it again.

The runner holds an exclusive `flock` on `<sweep>/.lock` while it works (see
`posttrainbench.host.sweep.runner.sweep_lock`). The kernel drops that lock when the process
dies, however it dies (`kill -9` included), so probing the lock tells a live runner from a
dead one without trusting a pid that may have been reused. Beside it the runner writes
`runner.json`: who it was and the exact command that started it, which is the command that
resumes the sweep.
"""

from __future__ import annotations

import os
import shlex
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.host.envs.lock_probe import lock_held

LOCK_FILE = ".lock"
RUNNER_FILE = "runner.json"


class RunnerInfo(BaseModel):
    """The last runner of a sweep: written when it takes the lock."""

    model_config = ConfigDict(extra="ignore")

    pid: int
    started_at: datetime
    cwd: str = Field(description="The directory the command ran in")
    command: list[str] = Field(
        default_factory=list, description="argv of the `ptb sweep` command; empty if unknown"
    )

    def resume_command(self, sweep_dir: Path) -> str:
        """The shell line that resumes the sweep: the same command in the same directory."""
        if not self.command:
            return f"ptb sweep ... -o {shlex.quote(str(sweep_dir))} (the same settings as before)"
        line = shlex.join(self.command)
        return line if Path(self.cwd) == Path.cwd() else f"cd {shlex.quote(self.cwd)} && {line}"


def write_runner_info(sweep_dir: Path, command: list[str] | None) -> None:
    """Record this process as the sweep's runner (called with the lock held)."""
    info = RunnerInfo(
        pid=os.getpid(), started_at=datetime.now(UTC), cwd=os.getcwd(), command=command or []
    )
    write_text_atomic(sweep_dir / RUNNER_FILE, info.model_dump_json(indent=2))


def read_runner_info(sweep_dir: Path) -> RunnerInfo | None:
    """The last runner's record; None when there is none or it cannot be read."""
    try:
        return RunnerInfo.model_validate_json((sweep_dir / RUNNER_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def runner_alive(sweep_dir: Path) -> bool:
    """Whether a process holds the sweep's lock now (a runner is working on it)."""
    return lock_held(sweep_dir / LOCK_FILE, shared_counts=False)
