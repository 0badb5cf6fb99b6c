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

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from posttrainbench.optimize.compiler import BuildOptions, build_agent_task
from posttrainbench.optimize.config import load_config
from posttrainbench.optimize.dataset import load_split
from posttrainbench.optimize.scorer import normalize_answer

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-task-gsm8k"
IMPORT_PATH = "posttrainbench.envs.local_sandbox:LocalSandboxEnvironment"


def _direct_score(solver: Path, split: str) -> float:
    """The solver's mean on *split*, computed here without the service (the reference)."""
    config = load_config(EXAMPLE / "task.yaml")
    samples = load_split(config.dataset, split)
    stdin = "".join(json.dumps({"id": s.id, "question": s.question}) + "\n" for s in samples)
    out = subprocess.run(["python3", str(solver)], input=stdin, capture_output=True, text=True, check=True).stdout
    answers = {item["id"]: item["answer"] for item in map(json.loads, out.splitlines())}
    correct = sum(normalize_answer(answers.get(s.id, "")) == normalize_answer(s.answer) for s in samples)
    return correct / len(samples)


def _run_job(task: Path, jobs: Path, agents: list[str]) -> list:
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    config = JobConfig(job_name="agent-task", jobs_dir=jobs, n_concurrent_trials=1, quiet=True,
                       agents=[AgentConfig(name=name) for name in agents], tasks=[TaskConfig(path=task)],
                       environment=EnvironmentConfig(import_path=IMPORT_PATH))

    async def run() -> object:
        job = await Job.create(config)
        return await job.run()

    return list(asyncio.run(run()).trial_results)  # type: ignore[attr-defined]


def test_example_agent_task_oracle_beats_baseline_and_nop_keeps_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    task = build_agent_task(EXAMPLE / "task.yaml", tmp_path / "tasks", BuildOptions(network_mode="no-network"))
    baseline_test = _direct_score(EXAMPLE / "baseline" / "solve.py", "test")
    improved_test = _direct_score(EXAMPLE / "solution" / "solve.py", "test")
    assert improved_test > baseline_test  # the example's premise, checked on real scores

    trials = {t.agent_info.name: t for t in _run_job(task, tmp_path / "jobs", ["oracle", "nop"])}
    for trial in trials.values():
        assert trial.exception_info is None, trial.exception_info
    verifier = {name: Path(t.trial_uri.removeprefix("file://")) / "verifier" for name, t in trials.items()}

    # Oracle: the improved commit was chosen (strictly above the baseline on dev) and scored.
    oracle = verifier["oracle"]
    final = json.loads((oracle / "final.json").read_text())
    assert final["chosen"].startswith("candidate-"), final
    assert final["considered"][0]["rescored_mean"] > final["baseline_selection_mean"]
    reward = json.loads((oracle / "reward.json").read_text())
    assert reward == {"reward": pytest.approx(improved_test)}
    assert trials["oracle"].verifier_result.rewards == {"reward": pytest.approx(improved_test)}
    # The ledger was charged for every evaluation the optimizer made.
    summary = json.loads((oracle / "service_summary.json").read_text())
    assert {c["split"] for c in summary["charges"]} == {"train", "dev"}
    assert summary["usage"]["train"]["runs_used"] == 2
    assert summary["registry"]["finalized_at"]
    # The agent's user could read neither the token, the ledger nor the private data.
    isolation = json.loads((oracle / "isolation.json").read_text())
    assert isolation["control"] is True, isolation  # the probe works: the repo is readable
    assert isolation["protected"] and not any(isolation["protected"].values()), isolation
    assert any(path.endswith("admin_token") for path in isolation["protected"])

    # nop: nothing evaluated, the baseline is scored, reward.json still written.
    nop = verifier["nop"]
    assert json.loads((nop / "reward.json").read_text()) == {"reward": pytest.approx(baseline_test)}
    assert json.loads((nop / "final.json").read_text())["chosen"] == "baseline"
    assert not json.loads((nop / "service_summary.json").read_text())["charges"]
