"""OpenCode traces: `opencode run --format json` (Harbor's `agent/opencode.txt`).

One JSON object per line, each with a `type` and a `part`: `text` and `reasoning`
(part.text), `tool_use` (part.tool, part.callID, part.state.input/output/error),
`step_start`, `step_finish` (part.tokens {input, output, reasoning, cache {read, write}}
and part.cost), `error`, and in newer releases `user` (parts with the prompt).
Timestamps are Unix milliseconds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from posttrainbench.task.integrity.traces.builder import TraceBuilder, as_text, to_cost, to_int
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage
from posttrainbench.task.integrity.traces.jsonl import dispatch_events, json_lines


def opencode_usage(part: Any) -> TokenUsage | None:
    """TokenUsage from a step_finish part (reasoning tokens are billed as output)."""
    if not isinstance(part, dict) or not isinstance(part.get("tokens"), dict):
        return None
    tokens = part["tokens"]
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    return TokenUsage(
        input_tokens=to_int(tokens.get("input")),
        output_tokens=to_int(tokens.get("output")) + to_int(tokens.get("reasoning")),
        cache_read_tokens=to_int(cache.get("read")),
        cache_write_tokens=to_int(cache.get("write")),
        cost_usd=to_cost(part.get("cost")),
    )


def _iso(millis: Any) -> str | None:
    if isinstance(millis, bool) or not isinstance(millis, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def parse_opencode(text: str) -> NormalizedTrace:
    """Parse an OpenCode `run --format json` trace."""
    builder = TraceBuilder("opencode")

    def handle(kind: Any, event: dict[str, Any]) -> None:
        timestamp = _iso(event.get("timestamp"))
        part = event.get("part") if isinstance(event.get("part"), dict) else {}
        if kind == "text":
            builder.message("assistant", as_text(part.get("text")), timestamp=timestamp)
        elif kind == "reasoning":
            builder.reasoning(as_text(part.get("text")), timestamp=timestamp)
        elif kind == "user":
            builder.message("user", as_text(event.get("parts")), timestamp=timestamp)
        elif kind == "tool_use":
            state = part.get("state") if isinstance(part.get("state"), dict) else {}
            call_id = part.get("callID") or part.get("id")
            builder.tool_call(
                str(part.get("tool") or "unknown"),
                state.get("input"),
                call_id=call_id,
                timestamp=timestamp,
            )
            if state.get("error") is not None:
                builder.tool_result(
                    f"[error] {as_text(state['error'])}", call_id=call_id, timestamp=timestamp
                )
            elif state.get("output") is not None:
                builder.tool_result(state["output"], call_id=call_id, timestamp=timestamp)
        elif kind == "step_finish":
            usage = opencode_usage(part)
            if usage is not None:
                builder.usage(usage, timestamp=timestamp)
        elif kind == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            data = error.get("data") if isinstance(error.get("data"), dict) else {}
            builder.message(
                "system",
                f"error: {as_text(data.get('message') or error.get('message') or error)}",
                timestamp=timestamp,
            )
        # step_start carries nothing to keep.

    dispatch_events(json_lines(text), builder, handle)
    return builder.build()
