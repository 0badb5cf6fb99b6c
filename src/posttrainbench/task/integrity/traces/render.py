"""A readable plain-text rendering of a NormalizedTrace, for people and for LLM judges."""

from __future__ import annotations

import json
import textwrap

from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage, TraceEvent

DEFAULT_MAX_CHARS = 2_000


def truncate(text: str, max_chars: int) -> str:
    """*text* cut to *max_chars* (0 means no limit), keeping head and tail."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:] if tail else ''}".rstrip(
        "\n"
    )


def format_usage(usage: TokenUsage, *, unknown_cost: bool = True) -> str:
    """`in 1,200 · out 300 · cache read 5,000 · cache write 100 · $0.0123` (zero parts left out).

    *unknown_cost* says "cost unknown" when there is no cost (else that part is left out).
    """
    parts = [f"in {usage.input_tokens:,}", f"out {usage.output_tokens:,}"]
    if usage.cache_read_tokens:
        parts.append(f"cache read {usage.cache_read_tokens:,}")
    if usage.cache_write_tokens:
        parts.append(f"cache write {usage.cache_write_tokens:,}")
    if usage.cost_usd is not None:
        parts.append(f"${usage.cost_usd:.4f}")
    elif unknown_cost:
        parts.append("cost unknown")
    return " · ".join(parts)


def _block(text: str, max_chars: int) -> str:
    return textwrap.indent(truncate(text.rstrip(), max_chars), "    ")


def render_event(event: TraceEvent, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """One event as a numbered header line plus an indented body where there is one."""
    number = f"[{event.index + 1}]"
    kind = event.kind
    if kind == "message":
        header = f"{number} {event.role or 'message'}" + (
            f" ({event.model})" if event.model else ""
        )
        return f"{header}\n{_block(event.text or '', max_chars)}"
    if kind == "tool_call":
        args = json.dumps(event.tool_input or {}, ensure_ascii=False)
        return f"{number} tool call: {event.tool}\n{_block(args, max_chars)}"
    if kind == "tool_result":
        label = f"tool result ({event.tool})" if event.tool else "tool result"
        body = event.text or ""
        return f"{number} {label}" + (
            f"\n{_block(body, max_chars)}" if body.strip() else ": (empty)"
        )
    if kind == "shell":
        return f"{number} shell $ {truncate(event.command or '', max_chars)}"
    if kind == "file_read":
        return f"{number} read file: {event.path}"
    if kind == "file_write":
        return f"{number} write file: {event.path}"
    if kind == "url":
        return f"{number} url: {event.url}"
    if kind == "usage":
        return f"{number} usage: {format_usage(event.usage or TokenUsage(), unknown_cost=False)}"
    return f"{number} raw\n{_block(event.text or '', max_chars)}"


def render_trace(trace: NormalizedTrace, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The whole trace: a header, numbered events, then the usage summary and any warnings.

    *max_chars* caps each message, tool input and tool output (0 means no limit).
    """
    header = f"# Trace ({trace.format})" + (f": {trace.source}" if trace.source else "")
    counts = (
        f"{len(trace.events)} events · {len(trace.shell_commands())} shell commands · "
        f"{len(trace.of_kind('file_read'))} file reads · {len(trace.of_kind('file_write'))} file writes · "
        f"{len(trace.urls())} URLs"
    )
    lines = [header, counts, ""]
    lines.extend(render_event(event, max_chars) for event in trace.events)
    lines += ["", "## Usage", format_usage(trace.usage)]
    if trace.warnings:
        lines += ["", "## Warnings"]
        lines.extend(f"- {warning}" for warning in trace.warnings)
    return "\n".join(lines) + "\n"
