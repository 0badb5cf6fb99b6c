"""Harbor trajectories: ATIF `agent/trajectory.json` (Agent Trajectory Interchange Format).

One JSON document: `schema_version` ("ATIF-v1.x"), `agent`, `steps` (each with `source`
system/user/agent, `message`, `reasoning_content`, `tool_calls` [{tool_call_id,
function_name, arguments}], `observation.results` [{source_call_id, content}] and
`metrics` {prompt_tokens, completion_tokens, cached_tokens, cost_usd}), `final_metrics`
and optional embedded `subagent_trajectories`. Harbor writes it for its own agents
(terminus-2) and converts the installed agents' logs into it. `prompt_tokens` includes
the cached tokens.
"""

from __future__ import annotations

import json
from typing import Any

from posttrainbench.task.integrity.traces.builder import (
    SHAPE_ERRORS,
    TraceBuilder,
    as_text,
    to_cost,
    to_int,
)
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage


def is_atif(doc: Any) -> bool:
    """Whether a parsed JSON document looks like an ATIF trajectory."""
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        return False
    return str(doc.get("schema_version", "")).startswith("ATIF") or isinstance(
        doc.get("agent"), dict
    )


def atif_usage(metrics: Any) -> TokenUsage | None:
    """TokenUsage from a step's `metrics` (None when it has no token counts or cost)."""
    if not isinstance(metrics, dict):
        return None
    if all(
        metrics.get(k) is None
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")
    ):
        return None
    extra = metrics.get("extra") if isinstance(metrics.get("extra"), dict) else {}
    cached = to_int(metrics.get("cached_tokens"))
    # Harbor's Claude Code conversion folds cache writes into prompt_tokens; take them out.
    creation = to_int(extra.get("cache_creation_input_tokens"))
    writes = creation or to_int(extra.get("cache_write_tokens"))
    return TokenUsage(
        input_tokens=max(to_int(metrics.get("prompt_tokens")) - cached - creation, 0),
        output_tokens=to_int(metrics.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=writes,
        cost_usd=to_cost(metrics.get("cost_usd")),
    )


def parse_harbor(text: str) -> NormalizedTrace:
    """Parse an ATIF trajectory.json (raises ValueError if *text* is not one)."""
    doc = json.loads(text)
    if not is_atif(doc):
        raise ValueError("not an ATIF trajectory (no `steps` list)")
    builder = TraceBuilder("harbor")
    has_step_usage = _trajectory(builder, doc)
    final = doc.get("final_metrics") if isinstance(doc.get("final_metrics"), dict) else {}
    tokens = None
    if not has_step_usage and any(
        final.get(k) is not None for k in ("total_prompt_tokens", "total_completion_tokens")
    ):
        cached = to_int(final.get("total_cached_tokens"))
        tokens = TokenUsage(
            input_tokens=max(to_int(final.get("total_prompt_tokens")) - cached, 0),
            output_tokens=to_int(final.get("total_completion_tokens")),
            cache_read_tokens=cached,
        )
    builder.report_total(tokens=tokens, cost=final.get("total_cost_usd"))
    return builder.build()


def _trajectory(builder: TraceBuilder, doc: dict, depth: int = 0) -> bool:
    """Emit one trajectory's steps (and its embedded subagents'); True if any step had usage."""
    agent = doc.get("agent") if isinstance(doc.get("agent"), dict) else {}
    default_model = agent.get("model_name")
    has_usage = False
    for step in doc.get("steps") or []:
        if not isinstance(step, dict):
            builder.raw(as_text(step), reason="ATIF step is not an object")
            continue
        try:
            has_usage |= _step(builder, step, default_model)
        except SHAPE_ERRORS as exc:
            # One step of an unexpected shape must not cost the rest of the trajectory.
            builder.raw(
                as_text(step), reason=f"unexpected ATIF step shape ({type(exc).__name__}: {exc})"
            )
    if depth < 5:  # embedded subagents, each a full trajectory
        for sub in doc.get("subagent_trajectories") or []:
            if is_atif(sub):
                builder.message(
                    "system", f"subagent trajectory {sub.get('trajectory_id') or ''}".strip()
                )
                has_usage |= _trajectory(builder, sub, depth + 1)
    return has_usage


def _step(builder: TraceBuilder, step: dict, default_model: str | None) -> bool:
    source = step.get("source")
    timestamp = step.get("timestamp") if isinstance(step.get("timestamp"), str) else None
    model = step.get("model_name") or default_model
    if source in ("system", "user"):
        builder.message(source, as_text(step.get("message")), timestamp=timestamp)
        return False
    builder.reasoning(as_text(step.get("reasoning_content")), model=model, timestamp=timestamp)
    builder.message("assistant", as_text(step.get("message")), model=model, timestamp=timestamp)
    for call in step.get("tool_calls") or []:
        if isinstance(call, dict):
            builder.tool_call(
                str(call.get("function_name") or "unknown"),
                call.get("arguments"),
                call_id=call.get("tool_call_id"),
                model=model,
                timestamp=timestamp,
            )
    observation = step.get("observation") if isinstance(step.get("observation"), dict) else {}
    for result in observation.get("results") or []:
        if isinstance(result, dict):
            builder.tool_result(
                result.get("content"), call_id=result.get("source_call_id"), timestamp=timestamp
            )
    usage = atif_usage(step.get("metrics"))
    if usage is not None:
        builder.usage(usage, model=model, timestamp=timestamp)
        return True
    return False
