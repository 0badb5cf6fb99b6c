"""Shared by the agent-task end-to-end tests (local sandbox, Docker): the example, its
direct scores, one Harbor job, and the checks on the oracle and ``nop`` trials."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from posttrainbench.service.api.scoring import load_config
from posttrainbench.service.mode_a.scorer import normalize_answer
from posttrainbench.service.shared.dataset import load_split

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent-task-gsm8k"


def direct_score(solver: Path, split: str) -> float:
    """The solver's mean on *split*, computed here without the service (the reference)."""
    config = load_config(EXAMPLE / "task.yaml")
    samples = load_split(config.dataset, split)
    stdin = "".join(json.dumps({"id": s.id, "question": s.question}) + "\n" for s in samples)
    out = subprocess.run(
        ["python3", str(solver)], input=stdin, capture_output=True, text=True, check=True
    ).stdout
    answers = {item["id"]: item["answer"] for item in map(json.loads, out.splitlines())}
    correct = sum(
        normalize_answer(answers.get(s.id, "")) == normalize_answer(s.answer) for s in samples
    )
    return correct / len(samples)


def run_job(
    task: Path, jobs: Path, agents: list, environment: object, job_name: str = "agent-task"
) -> list:
    """One Harbor job over *task* (one trial per agent: a name, or an ``AgentConfig``; one at a
    time); its trial results."""
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, TaskConfig

    config = JobConfig(
        job_name=job_name,
        jobs_dir=jobs,
        n_concurrent_trials=1,
        quiet=True,
        agents=[a if isinstance(a, AgentConfig) else AgentConfig(name=a) for a in agents],
        tasks=[TaskConfig(path=task)],
        environment=environment,
    )

    async def run() -> object:
        job = await Job.create(config)
        return await job.run()

    return list(asyncio.run(run()).trial_results)  # type: ignore[attr-defined]


def check_clean_audit(verifier: Path) -> dict:
    """The integrity audit found nothing: controls worked, every probe as the agent and as a
    candidate uid was refused, every stage quiesced, every protected entry kept root's
    ownership and modes; its verdict (the judges' contract) says clean. Returns the report."""
    isolation = json.loads((verifier / "isolation.json").read_text())
    assert isolation["control"] is True and isolation["deviations"] == [], isolation["deviations"]
    assert set(isolation["probes"]) == {"agent", "candidate"} and isolation["checked"] > 100
    agent, candidate = isolation["probes"]["agent"], isolation["probes"]["candidate"]
    assert any(path.endswith("admin_token") and not ok for path, ok in agent["read"].items())
    assert not any(candidate["create_in"][d] for d in ("/tmp", "/app", "/logs/agent"))
    assert candidate["socket"] == {"inet": False, "unix": False} and candidate["seccomp"] == "2"
    assert [q["stage"] for q in isolation["quiesce"]] == [
        "the agent finished",
        "the service stopped",
        "final scoring finished",
        "the probes finished",
    ]
    assert all(q["survivors"] is None for q in isolation["quiesce"])
    verdict = json.loads((verifier / "judgement_isolation.json").read_text())
    assert (verdict["judge"], verdict["flagged"]) == ("isolation", False)
    return isolation


def check_oracle_and_nop(trials: list) -> None:
    """The scripted optimizer's solver is chosen and scored on the hidden split; ``nop`` keeps the baseline's."""
    baseline_test = direct_score(EXAMPLE / "baseline" / "solve.py", "test")
    improved_test = direct_score(EXAMPLE / "solution" / "solve.py", "test")
    assert improved_test > baseline_test  # the example's premise, checked on real scores

    by_agent = {t.agent_info.name: t for t in trials}
    assert set(by_agent) == {"oracle", "nop"}
    for trial in by_agent.values():
        assert trial.exception_info is None, trial.exception_info
    verifier = {
        name: Path(t.trial_uri.removeprefix("file://")) / "verifier" for name, t in by_agent.items()
    }

    # Oracle: the improved commit was chosen (strictly above the baseline on dev) and scored.
    oracle = verifier["oracle"]
    final = json.loads((oracle / "final.json").read_text())
    assert final["chosen"].startswith("candidate-"), final
    assert final["considered"][0]["rescored_mean"] > final["baseline_selection_mean"]
    assert json.loads((oracle / "reward.json").read_text()) == {
        "reward": pytest.approx(improved_test)
    }
    assert by_agent["oracle"].verifier_result.rewards == {"reward": pytest.approx(improved_test)}
    # The ledger was charged for every evaluation the optimizer made.
    summary = json.loads((oracle / "service_summary.json").read_text())
    assert {c["split"] for c in summary["charges"]} == {"train", "dev"}
    assert summary["usage"]["train"]["runs_used"] == 2
    assert summary["registry"]["finalized_at"]
    check_clean_audit(oracle)

    # nop: nothing evaluated, the baseline is scored, reward.json still written.
    nop = verifier["nop"]
    assert json.loads((nop / "reward.json").read_text()) == {"reward": pytest.approx(baseline_test)}
    assert by_agent["nop"].verifier_result.rewards == {"reward": pytest.approx(baseline_test)}
    assert json.loads((nop / "final.json").read_text())["chosen"] == "baseline"
    check_clean_audit(nop)
    assert not json.loads((nop / "service_summary.json").read_text())["charges"]
