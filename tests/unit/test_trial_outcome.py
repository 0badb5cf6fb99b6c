"""`trial_outcome`: one reading of a Harbor trial, one test per kind, on result.json as Harbor
writes it (built with Harbor's own models, then read back from JSON like the file)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harbor.models.task.id import LocalTaskId
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from harbor.models.trial.result import AgentInfo, ExceptionInfo, TimingInfo, TrialResult
from harbor.models.verifier.result import VerifierResult

from posttrainbench.core.trial_outcome import OUTCOME_KINDS, RETRIED_KINDS, TrialOutcome, classify
from posttrainbench.task.sandbox.handoff import Handoff
from posttrainbench.task.schemas import Metrics

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
SETUP_END = T0 + timedelta(minutes=5)  # environment built and started, agent installed
AGENT_END = SETUP_END + timedelta(hours=2)
VERIFIER_START = AGENT_END + timedelta(minutes=1)
END = VERIFIER_START + timedelta(minutes=20)


def _result(
    *,
    reward: float | None = None,
    error: str | None = None,
    at: datetime = AGENT_END,
    agent_ran: bool = True,
    verifier_ran: bool | None = None,
    finished: bool = True,
) -> TrialResult:
    """A single-step trial as Harbor records it: phases stamped as far as it got."""
    path = Path("/nonexistent/tasks/gsm8k-qwen3-1.7b")
    verifier_ran = reward is not None if verifier_ran is None else verifier_ran
    return TrialResult(
        id=uuid.uuid4(),
        task_name="posttrainbench/gsm8k-qwen3-1.7b",
        trial_name="gsm8k-qwen3-1.7b__abc1234",
        trial_uri="file:///nonexistent/jobs/j/gsm8k-qwen3-1.7b__abc1234",
        task_id=LocalTaskId(path=path),
        task_checksum="0" * 64,
        config=TrialConfig(
            task=TaskConfig(path=path),
            trial_name="gsm8k-qwen3-1.7b__abc1234",
            agent=AgentConfig(name="claude-code", model_name="anthropic/claude-opus-4-1"),
        ),
        agent_info=AgentInfo(name="claude-code", version="1.0.0"),
        verifier_result=None if reward is None else VerifierResult(rewards={"reward": reward}),
        exception_info=None
        if error is None
        else ExceptionInfo(
            exception_type=error,
            exception_message=f"{error} happened\ndetails",
            exception_traceback="Traceback ...",
            occurred_at=at,
        ),
        started_at=T0,
        finished_at=END if finished else None,
        environment_setup=TimingInfo(started_at=T0, finished_at=SETUP_END),
        agent_execution=TimingInfo(started_at=SETUP_END, finished_at=AGENT_END)
        if agent_ran
        else None,
        verifier=TimingInfo(started_at=VERIFIER_START, finished_at=END) if verifier_ran else None,
    )


def _file(result: TrialResult) -> dict[str, Any]:
    """result.json as Harbor writes it (its computed exception policy included)."""
    return json.loads(result.model_dump_json(indent=4))


def _metrics(accuracy: float = 0.0, error: str | None = None, **kw: Any) -> Metrics:
    return Metrics(
        benchmark="gsm8k",
        model_path="/logs/artifacts/final_model",
        accuracy=accuracy,
        stderr=0.01,
        n=100,
        n_correct=int(accuracy * 100),
        error=error,
        **kw,
    )


def _classify(result: TrialResult, metrics: Metrics | None = None, **kw: Any) -> TrialOutcome:
    """The file and Harbor's object read the same; return that one outcome."""
    from_file = classify(
        _file(result), json.loads(metrics.model_dump_json()) if metrics else None, **kw
    )
    assert classify(result, metrics, **kw) == from_file
    return from_file


def test_completed_is_the_verifier_scoring_the_final_model() -> None:
    outcome = _classify(_result(reward=0.61), _metrics(0.61))
    assert (outcome.kind, outcome.reason, outcome.reward) == ("completed", "scored 0.61", 0.61)
    # An agent stopped by its time limit left a model, and it was scored: a result, not an error.
    stopped = _classify(_result(reward=0.4, error="AgentTimeoutError"), _metrics(0.4))
    assert stopped.kind == "completed"
    assert (
        stopped.reason
        == "scored 0.4 (the agent stopped: AgentTimeoutError: AgentTimeoutError happened)"
    )
    assert not outcome.retried and not outcome.errored


def test_no_model_is_the_verifier_saying_why_there_was_nothing_to_score() -> None:
    missing = _classify(
        _result(reward=0.0),
        _metrics(error="final model not found at /logs/artifacts/final_model", failure="no_model"),
    )
    assert (missing.kind, missing.reason, missing.reward) == (
        "no_model",
        "final model not found at /logs/artifacts/final_model",
        0.0,
    )
    rejected = Handoff(status="rejected", reason="12.0 GB is over the cap of 9.2 GB").error()
    assert rejected is not None
    # The agent ran out of time without saving: still no model (not an agent error).
    late = _classify(_result(reward=0.0, error="AgentTimeoutError"), _metrics(error=rejected))
    assert (late.kind, late.reason) == ("no_model", rejected)
    assert not late.retried and not late.errored


def test_agent_error_is_the_agent_failing_without_a_valid_reward() -> None:
    api = _classify(_result(error="ApiRateLimitError"))  # Harbor does not grade it
    assert (api.kind, api.reason) == (
        "agent_error",
        "ApiRateLimitError: ApiRateLimitError happened",
    )
    # Graded, but Harbor's policy says the reward does not stand.
    graded = _classify(_result(reward=0.3, error="ApiInternalServerError"), _metrics(0.3))
    assert graded.kind == "agent_error" and graded.reward == 0.3
    # A type Harbor does not know, raised while the agent ran: the agent's.
    unknown = _classify(_result(error="MemoryError", at=SETUP_END + timedelta(hours=1)))
    assert unknown.kind == "agent_error" and not unknown.retried
    # Known by name even where Harbor stamped no phase (a trial it wrote tersely).
    terse = _file(_result(error="ApiOverloadedError"))
    terse["agent_execution"] = None
    assert classify(terse).kind == "agent_error"


def test_infra_error_is_the_environment_or_harbor_failing() -> None:
    build = _classify(_result(error="EnvironmentStartTimeoutError", at=SETUP_END, agent_ran=False))
    assert build.kind == "infra_error" and build.reason.startswith("EnvironmentStartTimeoutError:")
    # Any exception before the agent started is setup: the environment's or Harbor's.
    docker = _classify(_result(error="DockerComposeError", at=T0, agent_ran=False))
    assert docker.kind == "infra_error"
    cancelled = _classify(_result(error="CancelledError"))
    assert cancelled.kind == "infra_error"
    unfinished = _classify(_result(finished=False))
    assert unfinished.kind == "infra_error" and "did not finish" in unfinished.reason
    assert all(o.retried and o.errored for o in (build, docker, cancelled, unfinished))


def test_verifier_error_is_the_verifier_crashing_or_writing_no_reward() -> None:
    timeout = _classify(_result(error="VerifierTimeoutError", at=END, verifier_ran=True))
    assert timeout.kind == "verifier_error"
    silent = _classify(_result(verifier_ran=True))
    assert (silent.kind, silent.reason) == (
        "verifier_error",
        "the verifier wrote no 'reward' reward",
    )
    crashed = _classify(_result(error="RuntimeError", at=END, verifier_ran=True))
    assert crashed.kind == "verifier_error"
    # The agent stopped, then the verifier ran and wrote nothing (its own error was dropped).
    after_agent = _classify(_result(error="AgentTimeoutError", verifier_ran=True))
    assert after_agent.kind == "verifier_error" and "AgentTimeoutError" in after_agent.reason
    # Its own failure, recorded in metrics.json: by `failure`, or by wording in older files.
    judge = _classify(
        _result(reward=0.0), _metrics(error="judge not configured: no key", failure="verifier")
    )
    assert (judge.kind, judge.reason) == (
        "verifier_error",
        "verifier: judge not configured: no key",
    )
    legacy = _classify(_result(reward=0.0), _metrics(error="cannot load benchmark: gone"))
    assert legacy.kind == "verifier_error"
    assert all(o.retried for o in (timeout, silent, crashed, after_agent, judge, legacy))


def test_the_retry_policy_reruns_only_failures_outside_the_agents_control() -> None:
    assert RETRIED_KINDS == {"infra_error", "verifier_error"}
    retried = {k for k in OUTCOME_KINDS if TrialOutcome(kind=k, reason="x").retried}
    assert retried == RETRIED_KINDS
    errored = {k for k in OUTCOME_KINDS if TrialOutcome(kind=k, reason="x").errored}
    assert errored == {"agent_error", "infra_error", "verifier_error"}


def test_another_reward_key_and_a_reason_on_one_line() -> None:
    result = _result(reward=None, verifier_ran=True)
    result.verifier_result = VerifierResult(rewards={"accuracy": 0.75})
    assert _classify(result, reward_key="accuracy").reward == 0.75
    assert _classify(result).kind == "verifier_error"
    long = _classify(_result(error="ApiError"))
    assert "\n" not in long.reason


@pytest.mark.parametrize("junk", [{}, {"trial_name": "t"}, []])
def test_a_file_that_is_not_a_trial_result_is_refused(junk: Any) -> None:
    with pytest.raises(ValueError):
        classify(junk)
