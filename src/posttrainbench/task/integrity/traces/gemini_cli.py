"""Gemini CLI traces: `gemini --output-format stream-json`.

One JSON object per line: `init` (session_id, model), `message` (role user/assistant,
`content`; assistant text arrives in `delta` chunks), `tool_use` (tool_name, tool_id,
parameters), `tool_result` (tool_id, status, output or error), `error` and a final
`result` whose `stats` hold the session's token counts. Harbor tees Gemini's output to
`agent/gemini-cli.txt`.
"""

from __future__ import annotations

from typing import Any

from posttrainbench.task.integrity.traces.builder import TraceBuilder, as_text, to_int
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage
from posttrainbench.task.integrity.traces.jsonl import dispatch_events, json_lines


def gemini_usage(stats: Any) -> TokenUsage | None:
    """TokenUsage from the `result` stats (`input_tokens` includes `cached`; `input` does not)."""
    if not isinstance(stats, dict):
        return None
    cached = to_int(stats.get("cached"))
    uncached = stats.get("input")
    return TokenUsage(
        input_tokens=to_int(uncached)
        if uncached is not None
        else max(to_int(stats.get("input_tokens")) - cached, 0),
        output_tokens=to_int(stats.get("output_tokens")),
        cache_read_tokens=cached,
    )


class _Deltas:
    """Joins the streamed chunks of one assistant message."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.timestamp: str | None = None

    def flush(self, builder: TraceBuilder, model: str | None) -> None:
        if self.parts:
            builder.message("assistant", "".join(self.parts), model=model, timestamp=self.timestamp)
        self.parts, self.timestamp = [], None


def parse_gemini_cli(text: str) -> NormalizedTrace:
    """Parse a Gemini CLI stream-json trace."""
    builder = TraceBuilder("gemini-cli")
    model: str | None = None
    pending = _Deltas()

    def flush() -> None:
        pending.flush(builder, model)

    def handle(kind: Any, event: dict[str, Any]) -> None:
        nonlocal model
        timestamp = event.get("timestamp") if isinstance(event.get("timestamp"), str) else None
        if kind == "message" and event.get("role") == "assistant" and event.get("delta"):
            pending.parts.append(as_text(event.get("content")))
            pending.timestamp = pending.timestamp or timestamp
            return
        flush()
        if kind == "init":
            model = event.get("model") or model
            builder.message(
                "system",
                f"session started: model={event.get('model')}",
                model=model,
                timestamp=timestamp,
            )
        elif kind == "message":
            role = "assistant" if event.get("role") == "assistant" else "user"
            builder.message(
                role,
                as_text(event.get("content")),
                model=model if role == "assistant" else None,
                timestamp=timestamp,
            )
        elif kind == "tool_use":
            builder.tool_call(
                str(event.get("tool_name") or "unknown"),
                event.get("parameters"),
                call_id=event.get("tool_id"),
                model=model,
                timestamp=timestamp,
            )
        elif kind == "tool_result":
            error = event.get("error")
            if event.get("status") == "error" or error:
                output = (
                    f"[error] {as_text(error.get('message') if isinstance(error, dict) else error)}"
                )
            else:
                output = as_text(event.get("output"))
            builder.tool_result(output, call_id=event.get("tool_id"), timestamp=timestamp)
        elif kind == "error":
            builder.message(
                "system",
                f"{event.get('severity') or 'error'}: {as_text(event.get('message'))}",
                timestamp=timestamp,
            )
        elif kind == "result":
            usage = gemini_usage(event.get("stats"))
            if usage is not None:
                builder.usage(usage, model=model, timestamp=timestamp)
            if event.get("status") not in (None, "success"):
                builder.message(
                    "system",
                    f"run ended: {event.get('status')} {as_text(event.get('error'))}".strip(),
                    timestamp=timestamp,
                )

    # A line that is not an event ends the streamed message before it.
    dispatch_events(json_lines(text), builder, handle, before_raw=flush)
    flush()
    return builder.build()
