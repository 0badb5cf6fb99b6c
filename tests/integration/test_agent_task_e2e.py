"""The example agent task, compiled and run end to end under Harbor on the local sandbox.

Why the local sandbox: it runs here without Docker, executes commands as other users
(``[agent] user``, resolved against the instance's own /etc/passwd, which start.sh
extends), keeps the root service started by the healthcheck alive across execs (one
init per instance), and with ``network_mode = "no-network"`` gives the instance its
own loopback, so the service's port never meets the host's.

Two trials: the oracle (a scripted optimizer that commits a better solver) and ``nop``
(does nothing: the reward is the baseline's). Scores are real: the trusted scorer runs
both solvers on the example's GSM8K problems.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harbor.models.trial.config import EnvironmentConfig

from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from tests.agent_task_e2e_checks import EXAMPLE, check_oracle_and_nop, run_job

pytestmark = pytest.mark.slow

IMPORT_PATH = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"


def test_example_agent_task_oracle_beats_baseline_and_nop_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    task = build_agent_task(
        EXAMPLE / "task.yaml", tmp_path / "tasks", BuildOptions(network_mode="no-network")
    )
    trials = run_job(
        task, tmp_path / "jobs", ["oracle", "nop"], EnvironmentConfig(import_path=IMPORT_PATH)
    )
    check_oracle_and_nop(trials)
