"""Shared test helpers (imported explicitly, not a conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def run_ptb(
    *args: str, cwd: Path | None = None, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the `ptb` CLI in a subprocess, as a user would (*env* adds variables)."""
    env = {**os.environ, "HARBOR_TELEMETRY": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from posttrainbench.host.cli.app import main; main()", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
