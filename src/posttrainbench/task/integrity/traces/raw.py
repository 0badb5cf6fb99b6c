"""The fallback for a trace in no known format: one `raw` event per line."""

from __future__ import annotations

from posttrainbench.task.integrity.traces.builder import MAX_RAW_EVENTS, TraceBuilder
from posttrainbench.task.integrity.traces.events import NormalizedTrace


def parse_raw(text: str, *, reason: str = "unknown trace format") -> NormalizedTrace:
    """Every non-blank line as a raw event (at most MAX_RAW_EVENTS), with one warning."""
    builder = TraceBuilder("raw")
    builder.warn(f"{reason}; kept as raw text, one event per line")
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines[:MAX_RAW_EVENTS]:
        builder.add("raw", text=line)
    if len(lines) > MAX_RAW_EVENTS:
        builder.warn(f"{len(lines) - MAX_RAW_EVENTS} more lines not kept (limit {MAX_RAW_EVENTS})")
    return builder.build()
