"""Errors of the agent-optimization family (each prints as one line; the CLI exits 2)."""

from posttrainbench.core.errors import PtbError


class AgentTaskConfigError(PtbError):
    """The agent-task config or its dataset is invalid."""


class BudgetExhausted(PtbError):
    """An evaluation would spend more than a split's budget."""


class CandidateError(PtbError):
    """A commit cannot be fetched from the agent's repository or exported."""


class SplitAccessError(PtbError):
    """The split is hidden (or unlisted) or the request does not fit its tier."""


class ServiceStateError(PtbError):
    """The service's state directory or admin token is unusable."""


class RequestRefused(PtbError):
    """A well-formed request the service will not run (e.g. below an aggregate split's min_samples)."""


class ServiceClosed(PtbError):
    """The service was finalized, or the request does not fit the task's reward mode."""
