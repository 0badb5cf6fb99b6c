"""What became of one Harbor trial: the single reading of its ``result.json`` and our verifier's
``metrics.json`` that the runner, the results store, ``ptb sweep`` and Mode B scoring share.

Kinds (each outcome carries a one-line reason):

- ``completed``: the verifier scored the agent's final model (an agent that stopped on its
  time limit or with a non-zero exit still completed: what it left was scored);
- ``no_model``: the verifier ran but the agent left no usable final model (missing, rejected
  by the collect hook, or failing to load); ``metrics.json`` says why;
- ``agent_error``: the agent's run failed (its model API, its process, its memory) and
  left no valid reward;
- ``infra_error``: the environment could not be built or started, the trial was cancelled
  or never finished, or Harbor itself failed outside the agent's run;
- ``verifier_error``: the verifier crashed, timed out or wrote no reward, or reported a
  failure of its own (an unreadable task spec, a benchmark it could not load).

The retry policy lives here too: only ``infra_error`` and ``verifier_error`` are run
again. The other kinds are the agent's own result; running them again would give it extra
attempts.

Harbor-free on purpose: this module is copied into agent tasks (the core zone),
where Mode A services run without Harbor. It reads a parsed ``TrialResult`` (or its JSON)
through its attributes, so the host passes Harbor's object and the payload the file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

OutcomeKind = Literal["completed", "no_model", "agent_error", "infra_error", "verifier_error"]
OUTCOME_KINDS: tuple[OutcomeKind, ...] = (
    "completed",
    "no_model",
    "agent_error",
    "infra_error",
    "verifier_error",
)
# Failures outside the agent's control: a resume runs these trials again.
RETRIED_KINDS: frozenset[OutcomeKind] = frozenset({"infra_error", "verifier_error"})
# Every kind but these counts as "errored" in summaries (RETRIED_KINDS and the agent's own
# errors: `--retry infra` runs only the former again); no_model is the agent's result.
ERROR_KINDS: frozenset[OutcomeKind] = frozenset({"agent_error", "infra_error", "verifier_error"})

# Harbor's exception types (harbor.models.trial.error_policy and its raisers) whose phase is
# known from the type alone; any other type is placed by when it happened (see _by_phase).
# Set beside Harbor's policy on purpose: Harbor's says whether to retry within a job; this
# says whose failure it is, which decides whether a resume may give the agent another go.
INFRA_EXCEPTIONS = frozenset(
    {
        "EnvironmentStartTimeoutError",
        "SandboxBuildFailedError",
        "AgentSetupTimeoutError",
        "HealthcheckError",
        "SSHAccessError",
        "GKEExecStreamClosedError",
        "GKEPodNotFoundError",
        "RuntimeRequestError",
        "ServiceOperationsUnsupportedError",
        "MissingExtraError",
        "CancelledError",  # the job was stopped (Ctrl-C, the nested-run timeout)
    }
)
VERIFIER_EXCEPTIONS = frozenset(
    {
        "VerifierTimeoutError",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
        "VerifierOutputParseError",
        "AddTestsDirError",
        "DownloadVerifierDirError",
        "RegradeError",
    }
)
# Raised by the agent's run: its process, its model API (a provider's outage included: the
# agent's harness met it, and a retry would be an extra attempt), its memory.
AGENT_EXCEPTIONS = frozenset(
    {
        "NonZeroAgentExitCodeError",
        "AgentTimeoutError",
        "AgentSafetyRefusalError",
        "AgentAuthenticationError",
        "ModelNotFoundError",
        "UnsupportedModelParametersError",
        "NetworkConnectionError",
        "ApiError",
        "ApiRateLimitError",
        "ApiUsageLimitError",
        "ApiInternalServerError",
        "ApiOverloadedError",
        "ApiConnectionClosedError",
        "ApiResponseStalledError",
        "ApiConnectionError",
        "ApiProviderResourceNotFoundError",
        "UnknownApiError",
        "ContextWindowExceededError",
        "OutputTokenExceededError",
        "ContextLengthExceededError",
        "OutputLengthExceededError",
        "SandboxLikelyOutOfMemoryError",
        "MemoryLimitExceededError",
        # litellm's, from agents that call models from the host process
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "APIConnectionError",
        "APIError",
        "Timeout",
        "BadRequestError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
        "APIResponseValidationError",
        "BudgetExceededError",
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
        "ContentPolicyViolationError",
    }
)
# metrics.json's `failure` (posttrainbench.task.schemas.MetricsFailure) for the verifier's own.
_VERIFIER_FAILURE = "verifier"


class HarborView(BaseModel):
    """Read from a Harbor object or its JSON alike; what is not named here is ignored."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)


class _Timing(HarborView):
    started_at: datetime | None = None
    finished_at: datetime | None = None


class _Policy(HarborView):
    has_valid_reward: bool = True


class HarborException(HarborView):
    """An exception Harbor recorded (its `ExceptionInfo`)."""

    exception_type: str
    exception_message: str = ""
    occurred_at: datetime | None = None
    # Harbor's computed policy, serialized into result.json; absent: Harbor's default.
    policy: _Policy = Field(default_factory=_Policy)

    def line(self) -> str:
        """`Type: first line of the message`."""
        lines = self.exception_message.strip().splitlines()
        return f"{self.exception_type}: {lines[0] if lines else ''}".strip().rstrip(":")


class _Verifier(HarborView):
    rewards: dict[str, Any] | None = None


class HarborStep(HarborView):
    """One step of a multi-step trial (Harbor's `StepResult`), as far as its outcome goes."""

    exception_info: HarborException | None = None


class HarborTrial(HarborView):
    """The fields of Harbor's ``TrialResult`` an outcome depends on (plus its names)."""

    trial_name: str
    task_name: str
    finished_at: datetime | None = None
    exception_info: HarborException | None = None
    step_results: list[HarborStep] | None = None
    verifier_result: _Verifier | None = None
    agent_execution: _Timing | None = None
    verifier: _Timing | None = None

    def exceptions(self) -> list[HarborException]:
        """Trial-level exception first, then the steps' (Harbor's recorded_exceptions)."""
        found = [self.exception_info] if self.exception_info else []
        return found + [s.exception_info for s in self.step_results or [] if s.exception_info]

    def reward(self, key: str) -> float | None:
        """The verifier's numeric reward under *key*, if it wrote one."""
        value = (self.verifier_result.rewards or {}).get(key) if self.verifier_result else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)


class _VerifierReport(HarborView):
    """Our verifier's ``metrics.json`` (posttrainbench.task.schemas.Metrics), as far as it matters."""

    error: str | None = None
    failure: str | None = None


class TrialOutcome(BaseModel):
    """What became of one trial, and why, in one line."""

    model_config = ConfigDict(extra="forbid")

    kind: OutcomeKind
    reason: str = Field(description="one line: the score, or why there is none")
    reward: float | None = Field(
        default=None, description="the verifier's reward under the key, whatever the kind"
    )

    @property
    def retried(self) -> bool:
        """Whether a resume runs this trial again (only failures outside the agent's control)."""
        return self.kind in RETRIED_KINDS

    @property
    def errored(self) -> bool:
        """An error of the agent, the infrastructure or the verifier (not a missing model)."""
        return self.kind in ERROR_KINDS


def classify(
    result: object, metrics: object | None = None, *, reward_key: str = "reward"
) -> TrialOutcome:
    """The outcome of one trial from Harbor's ``TrialResult`` (the object, or its parsed
    ``result.json`` dict) and, for PostTrainBench tasks, the verifier's ``Metrics`` (object
    or dict; None for other tasks or when the verifier wrote none)."""
    trial = HarborTrial.model_validate(result, from_attributes=True)
    report = (
        _VerifierReport.model_validate(metrics, from_attributes=True)
        if metrics is not None
        else None
    )
    reward = trial.reward(reward_key)

    def outcome(kind: OutcomeKind, reason: str) -> TrialOutcome:
        return TrialOutcome(kind=kind, reason=_one_line(reason), reward=reward)

    if trial.finished_at is None:
        # Harbor keeps an unfinished result.json on resume without running the trial again.
        return outcome("infra_error", "the trial did not finish (interrupted, or still running)")
    exceptions = trial.exceptions()
    # Harbor's policy: some exceptions (an agent's time limit, its exit code) leave the
    # reward valid; any other means the verifier's number, if any, does not stand.
    blocking = [e for e in exceptions if not e.policy.has_valid_reward]
    if reward is not None and not blocking:
        if report is not None and report.error:
            if report.failure == _VERIFIER_FAILURE:
                return outcome("verifier_error", f"verifier: {report.error}")
            return outcome("no_model", report.error)
        after = f" (the agent stopped: {exceptions[0].line()})" if exceptions else ""
        return outcome("completed", f"scored {reward:g}{after}")
    if exceptions:
        first = (blocking or exceptions)[0]
        kind = exception_kind(first.exception_type, _by_phase(first, trial))
        if kind == "agent_error" and _verifier_ran(trial) and reward is None:
            # The verifier ran after the agent's error and wrote nothing: its own exception
            # was dropped (Harbor keeps only the first), but the failure is the verifier's.
            return outcome("verifier_error", f"the verifier wrote no reward ({first.line()})")
        return outcome(kind, first.line())
    return outcome("verifier_error", f"the verifier wrote no {reward_key!r} reward")


def exception_kind(exception_type: str, by_phase: OutcomeKind = "agent_error") -> OutcomeKind:
    """The kind of a Harbor exception type; *by_phase* for a type not known by name."""
    if exception_type in INFRA_EXCEPTIONS:
        return "infra_error"
    if exception_type in VERIFIER_EXCEPTIONS:
        return "verifier_error"
    if exception_type in AGENT_EXCEPTIONS:
        return "agent_error"
    return by_phase


def _by_phase(exception: HarborException, trial: HarborTrial) -> OutcomeKind:
    """Before the agent started: setting up the environment or the agent (infrastructure);
    once the verifier started: the verifier's; in between: the agent's run (Harbor records
    the agent's exception just after it stamps the agent's end, so that gap is the agent's)."""
    agent = trial.agent_execution
    if agent is None or agent.started_at is None:
        return "infra_error"
    verifier_start = trial.verifier.started_at if trial.verifier else None
    when = exception.occurred_at
    if verifier_start is not None and when is not None and _utc(when) >= _utc(verifier_start):
        return "verifier_error"
    return "agent_error"


def _verifier_ran(trial: HarborTrial) -> bool:
    return trial.verifier is not None and trial.verifier.started_at is not None


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 500 else line[:497] + "..."
