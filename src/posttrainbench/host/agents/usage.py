"""Sum Harbor AgentContexts: the wrapper reports every round's tokens and cost as one."""

from __future__ import annotations

from harbor.models.agent.context import AgentContext, ModelUsage

from posttrainbench.host.agents.reprompt_policy import RoundUsage

_COUNTS = ("n_input_tokens", "n_cache_tokens", "n_output_tokens")


def has_usage(context: AgentContext) -> bool:
    """Whether a round reported any tokens, cost or per-model usage itself."""
    return any(getattr(context, name) is not None for name in (*_COUNTS, "cost_usd")) or bool(
        context.model_usage
    )


def round_usage(context: AgentContext) -> RoundUsage:
    """The usage fields of one round's context, for its log line."""
    return RoundUsage(
        n_input_tokens=context.n_input_tokens,
        n_cache_tokens=context.n_cache_tokens,
        n_output_tokens=context.n_output_tokens,
        cost_usd=context.cost_usd,
    )


def _add(a: float | int | None, b: float | int | None) -> float | int | None:
    # None means "not reported": it stays None only when neither side reported.
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def add_usage(total: AgentContext, part: AgentContext) -> None:
    """Add `part`'s tokens, cost and per-model usage into `total` in place."""
    for name in _COUNTS:
        setattr(total, name, _add(getattr(total, name), getattr(part, name)))
    total.cost_usd = _add(total.cost_usd, part.cost_usd)
    if part.model_usage:
        merged = dict(total.model_usage or {})
        for model, usage in part.model_usage.items():
            seen = merged.get(model)
            merged[model] = (
                usage.model_copy()
                if seen is None
                else ModelUsage(
                    n_input_tokens=seen.n_input_tokens + usage.n_input_tokens,
                    n_cache_tokens=seen.n_cache_tokens + usage.n_cache_tokens,
                    n_output_tokens=seen.n_output_tokens + usage.n_output_tokens,
                    cost_usd=_add(seen.cost_usd, usage.cost_usd),
                )
            )
        total.model_usage = merged
    if part.rollout_details:
        total.rollout_details = [*(total.rollout_details or []), *part.rollout_details]
