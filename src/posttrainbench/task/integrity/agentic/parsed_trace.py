"""``solve_parsed.txt``: the agent's trace as PostTrainBench's judges read it.

PostTrainBench renders each CLI's raw output with its own parser
(``src/trace_parsing/*_parser.py``): numbered ``=== Event N | type: ... ===`` blocks whose
fields (``Message:``, ``Command:``, ``Output:``, ``Tool:``, ``Arguments:``) are indented
by two spaces a level, JSON pretty-printed with its strings' newlines kept
(``_common.pretty_format_json``). We render our normalized trace (every CLI's trace
parsed into one event list) in that shape; the event types are ours (``message``,
``shell``, ``tool_call``, ...), not each CLI's own, so the text is not byte-identical to
PostTrainBench's for the same run (docs/parity.md).
"""

from __future__ import annotations

import json
from typing import Any

from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceEvent

# A trace this long is cut in the middle (the judge reads the file with its own tools).
MAX_CHARS = 8_000_000


def _indent(text: str, level: int) -> str:
    pad = "  " * level
    return "\n".join(pad + line for line in text.splitlines()) if text else pad


def pretty_format_json(obj: Any, indent_level: int = 0) -> str:
    """PostTrainBench's ``_common.pretty_format_json``: JSON with strings' newlines kept."""
    indent_str = "  " * indent_level
    next_indent = "  " * (indent_level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = []
        for key, value in obj.items():
            formatted = pretty_format_json(value, indent_level + 1)
            if "\n" in formatted and not formatted.startswith(("{", "[")):
                first, _, rest = formatted.partition("\n")
                items.append(f'{next_indent}"{key}": {first}\n{rest}')
            else:
                items.append(f'{next_indent}"{key}": {formatted}')
        return "{\n" + ",\n".join(items) + "\n" + indent_str + "}"
    if isinstance(obj, list):
        if not obj:
            return "[]"
        return (
            "[\n"
            + ",\n".join(f"{next_indent}{pretty_format_json(i, indent_level + 1)}" for i in obj)
            + "\n"
            + indent_str
            + "]"
        )
    if isinstance(obj, str):
        return obj if "\n" in obj else json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if obj is None:
        return "null"
    return str(obj)


def render_event(number: int, event: TraceEvent) -> str:
    """One event as PostTrainBench's parsers print it."""
    header = [f"type: {event.kind}" + (f" ({event.role})" if event.role else "")]
    if event.timestamp:
        header.append(f"ts: {event.timestamp}")
    lines = [f"=== Event {number} | {' | '.join(header)} ==="]
    if event.model:
        lines.append(_indent(f"Model: {event.model}", 1))
    if event.tool:
        lines.append(_indent(f"Tool: {event.tool}", 1))
    if event.command:
        lines.append(_indent(f"Command: {event.command}", 1))
    if event.path:
        lines.append(_indent(f"Path: {event.path}", 1))
    if event.url:
        lines.append(_indent(f"URL: {event.url}", 1))
    if event.tool_input and not event.command:
        lines.append(_indent("Arguments:", 1))
        lines.append(_indent(pretty_format_json(event.tool_input, 0), 2))
    if event.text:
        label = "Output:" if event.kind in ("tool_result", "shell_output") else "Message:"
        lines.append(_indent(label, 1))
        lines.append(_indent(event.text.rstrip(), 2))
    return "\n".join(lines)


def render_parsed(traces: list[NormalizedTrace], max_chars: int = MAX_CHARS) -> str:
    """Every trace's events, numbered from 1 across traces, blank-line separated."""
    blocks: list[str] = []
    number = 0
    for trace in traces:
        for event in trace.events:
            number += 1
            blocks.append(render_event(number, event))
    if not blocks:
        return "(no agent trace was found)\n"
    text = "\n\n".join(blocks) + "\n"
    if len(text) > max_chars:
        head = text[: max_chars // 3]
        tail = text[-(max_chars - len(head)) :]
        text = f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"
    return text
