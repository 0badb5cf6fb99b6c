"""A real agent CLI in a Docker trial against the scripted model: the offline CPU base
image carries the pinned CLIs, so Harbor's agent skips its download there too."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrainbench.host.agent_check.report import STAGES, CheckReport
from tests.helpers import run_ptb

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_codex_passes_every_stage_of_a_check_on_docker(docker_ready: None, tmp_path: Path) -> None:
    done = run_ptb(
        "agents",
        "check",
        "-a",
        "codex",
        "-e",
        "docker",
        "-o",
        str(tmp_path),
        "--json",
        timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = CheckReport.model_validate_json(done.stdout)
    assert report.env == "docker"
    assert [s.stage for s in report.stages] == list(STAGES)
    assert report.passed, "\n".join(f"{s.stage}: {s.ok} {s.detail}" for s in report.stages)
