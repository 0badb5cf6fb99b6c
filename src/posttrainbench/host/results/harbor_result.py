"""The parts of Harbor's `result.json` (its `TrialResult`) a stored run is built from.

A typed view, validated from the file's text: Harbor's own model validated every field
of the trial's config (six paths, the environment, the verifier...) at ~25-45 us a
trial, about a tenth of an export's reading, and importing it cost every `ptb results
export` ~55 ms before any worker started (only Harbor's error-policy table is imported
here, once a trial recorded an exception). Fields not named here are ignored; those named
keep Harbor's types, so a value Harbor would refuse here is refused too
(`tests/unit/test_harbor_result.py` holds the two side by side on Harbor-written files).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field, model_validator

from posttrainbench.core.trial_outcome import HarborException, HarborStep, HarborTrial, HarborView


class AgentContext(HarborView):
    """Harbor's `AgentContext`: what the agent's model calls cost."""

    n_input_tokens: int | None = None  # all input, cache included
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class _Exception(HarborException):
    """Harbor computes an exception's policy from its type (and override) on every load,
    whatever result.json says: a file written without it (edited, an older Harbor) or by
    another table still gets the policy Harbor would give it."""

    @model_validator(mode="before")
    @classmethod
    def _harbors_policy(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("exception_type"), str):
            # here, not at the top: only a trial with an exception needs it (~5 ms)
            from harbor.models.trial.error_policy import ErrorPolicyOverride, policy_for

            override = data.get("policy_override")
            policy = policy_for(
                data["exception_type"],
                ErrorPolicyOverride.model_validate(override) if override is not None else None,
            )
            data = {**data, "policy": {"has_valid_reward": policy.has_valid_reward}}
        return data


class _Step(HarborStep):
    agent_result: AgentContext | None = None
    exception_info: _Exception | None = None


class ModelInfo(HarborView):
    """The model the agent ran with."""

    name: str
    provider: str | None = None


class AgentInfo(HarborView):
    """The agent that ran the trial."""

    name: str
    version: str
    model_info: ModelInfo | None = None


class _AgentConfig(HarborView):
    model_name: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)


class _TaskConfig(HarborView):
    path: str | None = None  # the compiled task's directory


class _Config(HarborView):
    task: _TaskConfig
    agent: _AgentConfig = Field(default_factory=_AgentConfig)


class HarborResult(HarborTrial):
    """A trial's `result.json`, as far as a stored run needs it."""

    id: UUID
    config: _Config
    agent_info: AgentInfo
    agent_result: AgentContext | None = None
    exception_info: _Exception | None = None
    started_at: datetime | None = None
    step_results: list[_Step] | None = None  # type: ignore[assignment]

    def token_cost_totals(self) -> tuple[int | None, int | None, int | None, float | None]:
        """(input tokens, cache tokens, output tokens, cost): the trial's agent context, or
        the sum over its steps' (a multi-step trial has no trial-level one), as Harbor's
        `TrialResult.compute_token_cost_totals`; None where none of them has the value."""
        if self.agent_result is not None:
            contexts = [self.agent_result]
        else:
            contexts = [s.agent_result for s in self.step_results or [] if s.agent_result]
        totals: list[Any] = [None, None, None, None]
        for context in contexts:
            values = (
                context.n_input_tokens,
                context.n_cache_tokens,
                context.n_output_tokens,
                context.cost_usd,
            )
            for i, value in enumerate(values):
                if value is not None:
                    totals[i] = (totals[i] or 0) + value
        return totals[0], totals[1], totals[2], totals[3]
