"""Claude Code traces: `claude --output-format stream-json` (Harbor's `agent/claude-code.txt`).

One JSON object per line: `system` (subtype `init`: model, cwd, tools), `assistant`
(an Anthropic message whose content blocks are text / thinking / tool_use, with usage),
`user` (the prompt, or tool_result blocks) and a final `result` with `total_cost_usd`
and the session's total `usage`. Claude Code's session files
(`agent/sessions/projects/*/<session>.jsonl`) use the same `assistant`/`user` lines, so
they parse here too.
"""

from __future__ import annotations

from typing import Any

from posttrainbench.task.integrity.traces.builder import TraceBuilder, as_text, to_int
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage
from posttrainbench.task.integrity.traces.jsonl import dispatch_events, json_lines


def anthropic_usage(usage: Any) -> TokenUsage | None:
    """TokenUsage from an Anthropic `usage` object (None when there is none)."""
    if not isinstance(usage, dict):
        return None
    return TokenUsage(
        input_tokens=to_int(usage.get("input_tokens")),
        output_tokens=to_int(usage.get("output_tokens")),
        cache_read_tokens=to_int(usage.get("cache_read_input_tokens")),
        cache_write_tokens=to_int(usage.get("cache_creation_input_tokens")),
    )


def parse_claude_code(text: str) -> NormalizedTrace:
    """Parse a Claude Code stream-json (or session JSONL) trace."""
    builder = TraceBuilder("claude-code")
    lines = json_lines(text)

    # One API response is streamed as several `assistant` lines that share a message id
    # and repeat its usage, which grows as it streams: count the last one, once.
    last_usage: dict[str, Any] = {}
    for line in lines:
        message = (line.obj or {}).get("message")
        if (line.obj or {}).get("type") == "assistant" and isinstance(message, dict):
            if isinstance(message.get("id"), str) and message.get("usage") is not None:
                last_usage[message["id"]] = message["usage"]
    counted: set[str] = set()
    default_model: str | None = None

    def handle(kind: Any, event: dict[str, Any]) -> None:
        nonlocal default_model
        timestamp = event.get("timestamp") if isinstance(event.get("timestamp"), str) else None
        message = event.get("message")
        if kind == "system" and event.get("subtype") == "init":
            default_model = event.get("model") or default_model
            builder.message(
                "system",
                f"session started: model={event.get('model')} cwd={event.get('cwd')}",
                model=default_model,
                timestamp=timestamp,
            )
        elif kind == "assistant" and isinstance(message, dict):
            model = message.get("model") or default_model
            _assistant_content(builder, message.get("content"), model=model, timestamp=timestamp)
            msg_id = message.get("id")
            usage = last_usage.get(msg_id, message.get("usage")) if msg_id else message.get("usage")
            parsed = anthropic_usage(usage)
            if parsed is not None and (not msg_id or msg_id not in counted):
                builder.usage(parsed, model=model, timestamp=timestamp)
                if msg_id:
                    counted.add(msg_id)
        elif kind == "user" and isinstance(message, dict):
            _user_content(builder, message.get("content"), timestamp=timestamp)
        elif kind == "result":
            builder.report_total(
                tokens=anthropic_usage(event.get("usage")), cost=event.get("total_cost_usd")
            )
            if event.get("is_error") or str(event.get("subtype", "")).startswith("error"):
                builder.message(
                    "system",
                    f"run ended with an error: {event.get('subtype')} "
                    f"{as_text(event.get('result') or event.get('errors'))}".strip(),
                    timestamp=timestamp,
                )
        # Other types (stream_event, summary, file-history-snapshot, ...) carry no actions.

    dispatch_events(lines, builder, handle)
    return builder.build()


def _assistant_content(
    builder: TraceBuilder, content: Any, *, model: str | None, timestamp: str | None
) -> None:
    if isinstance(content, str):
        builder.message("assistant", content, model=model, timestamp=timestamp)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        block_type = block.get("type")
        if block_type == "text":
            builder.message(
                "assistant", as_text(block.get("text")), model=model, timestamp=timestamp
            )
        elif block_type == "thinking":
            builder.reasoning(
                as_text(block.get("thinking") or block.get("text")),
                model=model,
                timestamp=timestamp,
            )
        elif block_type in ("tool_use", "server_tool_use"):
            builder.tool_call(
                str(block.get("name") or "unknown"),
                block.get("input"),
                call_id=block.get("id"),
                model=model,
                timestamp=timestamp,
            )


def _user_content(builder: TraceBuilder, content: Any, *, timestamp: str | None) -> None:
    if isinstance(content, str):
        builder.message("user", content, timestamp=timestamp)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            output = as_text(block.get("content"))
            if block.get("is_error"):
                output = f"[error] {output}"
            builder.tool_result(output, call_id=block.get("tool_use_id"), timestamp=timestamp)
        elif block.get("type") == "text":
            builder.message("user", as_text(block.get("text")), timestamp=timestamp)
