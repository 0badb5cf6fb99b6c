"""Accumulates normalized events while a parser walks one trace file.

The parsers only say what they saw ("a tool call named X with input Y", "a usage
record"); the builder numbers the events, derives the shell/file/url events from tool
calls (see `tools.py`), caps pathological sizes and sums token usage.

Token convention for `TokenUsage`: `input_tokens` counts prompt tokens *not* read from
the prompt cache (Anthropic's convention); cached prompt tokens go to
`cache_read_tokens`, so the parsers of OpenAI-style counts (where input includes the
cached part) subtract it.
"""

from __future__ import annotations

import json
from typing import Any

from posttrainbench.task.integrity.traces.events import (
    EventKind,
    NormalizedTrace,
    TokenUsage,
    TraceEvent,
    TraceFormat,
)
from posttrainbench.task.integrity.traces.tools import derive_actions, urls_in_text

MAX_TEXT_CHARS = 100_000  # one event's text; a `cat` of a large file should not blow up memory
MAX_RAW_EVENTS = 5_000  # raw fallback lines kept per trace
MAX_WARNINGS = 50

# What reading a line or step of an unexpected shape raises; parsers keep such input raw.
SHAPE_ERRORS = (ValueError, TypeError, KeyError, AttributeError)


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """*text* cut to *limit* characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters cut]"


def as_text(value: Any) -> str:
    """Tool output of any shape as text: strings as-is, content-block lists joined, else JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, dict) and item.get("type") in ("image", "audio"):
                parts.append(f"[{item['type']} omitted]")
            else:
                parts.append(as_text(item))
        return "\n".join(p for p in parts if p)
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def to_int(value: Any) -> int:
    """A token count from untrusted JSON: ints and numeric strings, anything else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return max(int(value), 0)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def to_cost(value: Any) -> float | None:
    """A dollar amount from untrusted JSON, or None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        cost = float(value)
    except (TypeError, ValueError):
        return None
    return cost if cost >= 0 else None


def add_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """The sum of two usages (cost stays None only if both are None)."""
    cost = (
        None
        if a.cost_usd is None and b.cost_usd is None
        else (a.cost_usd or 0.0) + (b.cost_usd or 0.0)
    )
    return TokenUsage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_read_tokens=a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
        cost_usd=cost,
    )


# Event fields that must be strings; untrusted JSON may put numbers or objects there.
_TEXT_FIELDS = ("text", "tool", "command", "path", "url", "model", "timestamp")


class TraceBuilder:
    """Collects the events of one trace in order; `build()` returns the NormalizedTrace."""

    def __init__(self, fmt: TraceFormat) -> None:
        self.format: TraceFormat = fmt
        self.events: list[TraceEvent] = []
        self.warnings: list[str] = []
        self._dropped_warnings = 0
        self._raw_count = 0
        self._tool_names: dict[str, str] = {}  # call id -> tool name, to label results
        self._reported_tokens: TokenUsage | None = None
        self._reported_cost: float | None = None

    # -- primitives -------------------------------------------------------------
    def add(self, kind: EventKind, **fields: Any) -> TraceEvent:
        """Append one event (text is clipped, odd JSON values made text); returns it."""
        for key in _TEXT_FIELDS:
            value = fields.get(key)
            if value is not None and not isinstance(value, str):
                fields[key] = as_text(value)
        if isinstance(fields.get("text"), str):
            fields["text"] = clip(fields["text"])
        event = TraceEvent(index=len(self.events), kind=kind, **fields)
        self.events.append(event)
        return event

    def warn(self, message: str) -> None:
        """Record a warning (the first MAX_WARNINGS verbatim, then only a count)."""
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)
        else:
            self._dropped_warnings += 1

    # -- what parsers report ------------------------------------------------------
    def message(
        self, role: str, text: str, *, model: str | None = None, timestamp: str | None = None
    ) -> None:
        """A message from the user, the assistant or the system (empty text is skipped)."""
        if text and text.strip():
            self.add("message", role=role, text=text, model=model, timestamp=timestamp)

    def reasoning(
        self, text: str, *, model: str | None = None, timestamp: str | None = None
    ) -> None:
        """The assistant's visible reasoning, kept as a message: it shows intent to the judges."""
        if text and text.strip():
            self.message(
                "assistant", f"[reasoning] {text.strip()}", model=model, timestamp=timestamp
            )

    def tool_call(
        self,
        name: str,
        tool_input: Any,
        *,
        call_id: str | None = None,
        model: str | None = None,
        timestamp: str | None = None,
    ) -> None:
        """A tool call, followed by the shell/file/url events it stands for."""
        if not isinstance(tool_input, dict):
            tool_input = {} if tool_input in (None, "") else {"input": tool_input}
        name = as_text(name) or "unknown"
        call_id = _key(call_id)
        if call_id:
            self._tool_names[call_id] = name
        self.add(
            "tool_call",
            role="assistant",
            tool=name,
            tool_input=tool_input,
            model=model,
            timestamp=timestamp,
        )
        for action in derive_actions(name, tool_input):
            self._action(action.kind, action.value, tool=name, timestamp=timestamp)

    def tool_result(
        self,
        output: Any,
        *,
        call_id: str | None = None,
        tool: str | None = None,
        timestamp: str | None = None,
    ) -> None:
        """What a tool returned (labelled with the tool's name when the call id is known)."""
        call_id = _key(call_id)
        name = tool or (self._tool_names.get(call_id) if call_id else None)
        self.add("tool_result", role="tool", tool=name, text=as_text(output), timestamp=timestamp)

    def shell(self, command: str, *, tool: str | None = None, timestamp: str | None = None) -> None:
        """A shell command run outside a named tool call (e.g. a Codex command_execution item)."""
        self._action("shell", command, tool=tool, timestamp=timestamp)
        for url in urls_in_text(command):
            self._action("url", url, tool=tool, timestamp=timestamp)

    def file_access(
        self, kind: EventKind, path: str, *, tool: str | None = None, timestamp: str | None = None
    ) -> None:
        """A file read (`file_read`) or written (`file_write`)."""
        self._action(kind, path, tool=tool, timestamp=timestamp)

    def url(self, url: str, *, tool: str | None = None, timestamp: str | None = None) -> None:
        """A URL fetched, or `search:QUERY` for a web search."""
        self._action("url", url, tool=tool, timestamp=timestamp)

    def usage(
        self, usage: TokenUsage, *, model: str | None = None, timestamp: str | None = None
    ) -> None:
        """Tokens (and cost) of one model call or turn."""
        self.add("usage", usage=usage, model=model, timestamp=timestamp)

    def report_total(self, *, tokens: TokenUsage | None = None, cost: Any = None) -> None:
        """Totals the agent itself reported; they win over the sum of the usage events."""
        if tokens is not None:
            self._reported_tokens = tokens
        parsed = to_cost(cost)
        if parsed is not None:
            self._reported_cost = parsed

    def raw(self, line: str, *, line_no: int | None = None, reason: str = "not valid JSON") -> None:
        """A line the parser could not understand: kept as a raw event, with a warning."""
        where = f"line {line_no}" if line_no is not None else "a line"
        self.warn(f"{where}: {reason}; kept as raw text")
        self._raw_count += 1
        if self._raw_count <= MAX_RAW_EVENTS:
            self.add("raw", text=line)
        elif self._raw_count == MAX_RAW_EVENTS + 1:
            self.warn(f"more than {MAX_RAW_EVENTS} raw lines; the rest are not kept")

    # -- result -------------------------------------------------------------------
    def build(self, source: str | None = None) -> NormalizedTrace:
        """The finished trace: events in order, total usage, warnings."""
        total = TokenUsage()
        for event in self.events:
            if event.kind == "usage" and event.usage is not None:
                total = add_usage(total, event.usage)
        if self._reported_tokens is not None:
            total = self._reported_tokens.model_copy(update={"cost_usd": total.cost_usd})
        if self._reported_cost is not None:
            total = total.model_copy(update={"cost_usd": self._reported_cost})
        warnings = list(self.warnings)
        if self._dropped_warnings:
            warnings.append(f"... and {self._dropped_warnings} more warnings")
        return NormalizedTrace(
            format=self.format, source=source, events=self.events, usage=total, warnings=warnings
        )

    def _action(
        self, kind: EventKind, value: str, *, tool: str | None, timestamp: str | None
    ) -> None:
        field = {"shell": "command", "file_read": "path", "file_write": "path", "url": "url"}[kind]
        self.add(kind, role="assistant", tool=tool, timestamp=timestamp, **{field: value})


def _key(call_id: Any) -> str | None:
    """A tool call id usable as a dict key (ids from untrusted JSON may be any value)."""
    if call_id is None or call_id == "":
        return None
    return call_id if isinstance(call_id, str) else as_text(call_id)
