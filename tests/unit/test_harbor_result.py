"""HarborResult, the export's view of result.json, side by side with Harbor's own TrialResult
on files Harbor's model wrote: the same values, the same totals, the same refusals."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from harbor.models.agent.context import AgentContext
from harbor.models.task.id import LocalTaskId
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from harbor.models.trial.error_policy import ErrorPolicyOverride
from harbor.models.trial.result import (
    AgentInfo,
    ExceptionInfo,
    ModelInfo,
    StepResult,
    TimingInfo,
    TrialResult,
)
from harbor.models.verifier.result import VerifierResult
from pydantic import ValidationError

from posttrainbench.core.trial_outcome import classify
from posttrainbench.host.results.harbor_result import HarborResult

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _result(**changes) -> TrialResult:
    fields = dict(
        id=uuid.uuid4(),
        task_name="posttrainbench/gsm8k-qwen3-1.7b",
        trial_name="gsm8k-qwen3-1.7b__abc1234",
        trial_uri="file:///jobs/j/gsm8k-qwen3-1.7b__abc1234",
        task_id=LocalTaskId(path=Path("/tasks/gsm8k-qwen3-1.7b")),
        task_checksum="0" * 64,
        config=TrialConfig(
            task=TaskConfig(path=Path("/tasks/gsm8k-qwen3-1.7b")),
            agent=AgentConfig(
                name="claude-code", model_name="anthropic/claude-x", kwargs={"origin": "r1"}
            ),
        ),
        agent_info=AgentInfo(
            name="claude-code",
            version="2.1.0",
            model_info=ModelInfo(name="claude-x", provider="anthropic"),
        ),
        agent_result=AgentContext(
            n_input_tokens=1200, n_cache_tokens=200, n_output_tokens=300, cost_usd=0.5
        ),
        verifier_result=VerifierResult(rewards={"reward": 0.25}),
        started_at=T0,
        finished_at=T0 + timedelta(hours=3),
        agent_execution=TimingInfo(started_at=T0, finished_at=T0 + timedelta(hours=2)),
    )
    return TrialResult(**(fields | changes))


def _steps(*contexts: AgentContext | None) -> list[StepResult]:
    return [StepResult(step_name=f"s{i}", agent_result=c) for i, c in enumerate(contexts)]


VARIANTS = {
    "one step": {},
    "several steps": {
        "agent_result": None,
        "step_results": _steps(
            AgentContext(n_input_tokens=10, n_output_tokens=5, cost_usd=0.25),
            None,
            AgentContext(n_input_tokens=7, n_cache_tokens=3, cost_usd=None),
        ),
    },
    "a trial context and steps' (the trial's wins)": {
        "step_results": _steps(AgentContext(n_input_tokens=99, cost_usd=9.0)),
    },
    "steps without contexts": {"agent_result": None, "step_results": _steps(None, None)},
    "no context": {"agent_result": None},
    "no model, no task path, an exception": {
        "agent_info": AgentInfo(name="oracle", version="0"),
        "config": TrialConfig(task=TaskConfig(name="org/some-task", git_url="https://x/y")),
        "exception_info": ExceptionInfo(
            exception_type="AgentTimeoutError",
            exception_message="time up",
            exception_traceback="",
            occurred_at=T0,
        ),
        "finished_at": None,
    },
}


@pytest.mark.parametrize("changes", VARIANTS.values(), ids=VARIANTS.keys())
def test_the_view_reads_what_harbors_model_reads(changes) -> None:
    harbor = _result(**changes)
    view = HarborResult.model_validate_json(harbor.model_dump_json(indent=2))
    assert str(view.id) == str(harbor.id)
    assert (view.trial_name, view.task_name) == (harbor.trial_name, harbor.task_name)
    assert view.agent_info.model_dump() == harbor.agent_info.model_dump()
    assert view.config.agent.model_name == harbor.config.agent.model_name
    assert view.config.agent.kwargs == harbor.config.agent.kwargs
    task_path = harbor.config.task.path
    assert view.config.task.path == (str(task_path) if task_path else None)
    assert (view.started_at, view.finished_at) == (harbor.started_at, harbor.finished_at)
    assert view.token_cost_totals() == harbor.compute_token_cost_totals()


def _exception(kind: str, **more) -> ExceptionInfo:
    return ExceptionInfo(
        exception_type=kind,
        exception_message="it failed",
        exception_traceback="",
        occurred_at=T0,
        **more,
    )


OUTCOMES = {
    "scored": {},
    "infra error, reward left behind": {
        "exception_info": _exception("EnvironmentStartTimeoutError")
    },
    "agent timeout, reward valid": {"exception_info": _exception("AgentTimeoutError")},
    "unknown error": {"exception_info": _exception("SomethingElse")},
    "overridden policy": {
        "exception_info": _exception(
            "EnvironmentStartTimeoutError",
            policy_override=ErrorPolicyOverride(has_valid_reward=True),
        )
    },
    "a step's error": {
        "agent_result": None,
        "step_results": [
            StepResult(step_name="s0", exception_info=_exception("EnvironmentStartTimeoutError"))
        ],
    },
}


@pytest.mark.parametrize("policy_in_file", [True, False], ids=["as written", "policy dropped"])
@pytest.mark.parametrize("changes", OUTCOMES.values(), ids=OUTCOMES.keys())
def test_the_outcome_is_harbors_whether_or_not_the_file_carries_the_policy(
    changes, policy_in_file: bool
) -> None:
    """Harbor recomputes an exception's policy on every load; a file that lacks it (edited
    by hand, as a sweep's retry test does, or an older Harbor's) is classified the same."""
    raw = json.loads(_result(**changes).model_dump_json())
    if not policy_in_file:
        for info in [raw.get("exception_info")] + [
            step.get("exception_info") for step in raw.get("step_results") or []
        ]:
            if info:
                info.pop("policy")
    text = json.dumps(raw)
    expected = classify(TrialResult.model_validate_json(text))
    assert classify(HarborResult.model_validate_json(text)) == expected


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw.pop("agent_info"),
        lambda raw: raw.pop("config"),
        lambda raw: raw["agent_result"].update(n_input_tokens="many"),
        lambda raw: raw.update(id="not-a-uuid"),
        lambda raw: raw.update(finished_at="yesterday"),
    ],
    ids=["no agent_info", "no config", "tokens not a number", "id not a uuid", "bad time"],
)
def test_what_harbors_model_refuses_the_view_refuses(damage) -> None:
    raw = json.loads(_result().model_dump_json())
    damage(raw)
    text = json.dumps(raw)
    with pytest.raises(ValidationError):
        TrialResult.model_validate_json(text)
    with pytest.raises(ValidationError):
        HarborResult.model_validate_json(text)
