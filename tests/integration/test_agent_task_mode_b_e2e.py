"""The Mode B example (``examples/agent-task-harbor``), compiled and run under Harbor on the
local sandbox: the task's evaluation service scores candidate agent classes by nested Harbor
jobs over the inner echo tasks, each inner trial in a local sandbox nested in the task's.

Two trials, each by the ``harbor run`` command the README shows: the oracle (the scripted
optimizer commits ``solution/agent.py``, which reads the word from the instruction) and ``nop``. The baseline writes 'alpha' whatever it is asked, so it
scores 0 on the hidden split (gamma, delta) and the improved agent 1: real nested verifier
rewards, not numbers of ours.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harbor.models.trial.result import TrialResult

from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from tests.agent_task_e2e_checks import check_clean_audit

pytestmark = pytest.mark.slow

LOCAL_SANDBOX = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
EXAMPLE_B = Path(__file__).resolve().parents[2] / "examples" / "agent-task-harbor"


def _nested_rewards(verifier: Path) -> dict:
    return json.loads((verifier / "final.json").read_text())


def _harbor_run(task: Path, jobs: Path, agent: str) -> TrialResult:
    """``harbor run -p TASK -a AGENT --env LOCAL_SANDBOX``, as in the README; its one trial."""
    harbor = Path(sys.executable).parent / "harbor"
    done = subprocess.run(
        [str(harbor), "run", "-p", str(task), "-a", agent, "--env", LOCAL_SANDBOX]
        + ["-o", str(jobs), "--job-name", agent, "-q"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (result,) = (jobs / agent).glob("*/result.json")
    return TrialResult.model_validate_json(result.read_text())


def test_mode_b_example_oracle_beats_the_baseline_and_nop_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode_b_task_cache: Path
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(mode_b_task_cache))
    task = build_agent_task(
        EXAMPLE_B / "task.yaml", tmp_path / "tasks", BuildOptions(network_mode="no-network")
    )
    trials = [_harbor_run(task, tmp_path / "jobs", agent) for agent in ("oracle", "nop")]
    by_agent = {t.agent_info.name: t for t in trials}
    assert set(by_agent) == {"oracle", "nop"}
    for trial in by_agent.values():
        assert trial.exception_info is None, trial.exception_info
    verifier = {
        name: Path(t.trial_uri.removeprefix("file://")) / "verifier" for name, t in by_agent.items()
    }

    # Oracle: the improved agent class was chosen on train and scored on the hidden split.
    oracle = verifier["oracle"]
    final = _nested_rewards(oracle)
    assert final["chosen"].startswith("candidate-"), final
    assert final["considered"][0]["rescored_mean"] > final["baseline_selection_mean"]
    assert json.loads((oracle / "reward.json").read_text()) == {"reward": 1.0}
    assert by_agent["oracle"].verifier_result.rewards == {"reward": 1.0}
    # Every evaluation the optimizer made was charged: two nested runs on train.
    summary = json.loads((oracle / "service_summary.json").read_text())
    assert {c["split"] for c in summary["charges"]} == {"train"}
    assert summary["usage"]["train"]["runs_used"] == 2
    check_clean_audit(oracle)

    # nop: nothing evaluated; the baseline is scored on the hidden split.
    nop = verifier["nop"]
    assert json.loads((nop / "reward.json").read_text()) == {"reward": 0.0}
    assert by_agent["nop"].verifier_result.rewards == {"reward": 0.0}
    assert _nested_rewards(nop)["chosen"] == "baseline"
    assert not json.loads((nop / "service_summary.json").read_text())["charges"]
    check_clean_audit(nop)
