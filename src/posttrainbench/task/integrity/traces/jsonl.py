"""Splitting a JSONL trace into lines, each parsed or not."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from posttrainbench.task.integrity.traces.builder import SHAPE_ERRORS, TraceBuilder


class JsonLine(NamedTuple):
    """One non-blank line: its 1-based number, its text, and its JSON object (None if not one)."""

    number: int
    text: str
    obj: dict[str, Any] | None


def parse_object(line: str) -> dict[str, Any] | None:
    """The JSON object on *line*, or None when it is not a JSON object."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def json_lines(text: str) -> list[JsonLine]:
    """Every non-blank line of *text*, parsed where it is a JSON object."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            lines.append(JsonLine(number, line.rstrip("\r\n"), parse_object(line)))
    return lines


def dispatch_events(
    lines: Iterable[JsonLine],
    builder: TraceBuilder,
    handle: Callable[[Any, dict[str, Any]], None],
    *,
    before_raw: Callable[[], None] | None = None,
) -> None:
    """Call ``handle(type, event)`` for each JSON object with a `type`; keep other lines raw.

    A line that is not a JSON object, or an object without a `type`, becomes a raw event
    (after ``before_raw``, so a parser can first flush what it was accumulating). A line
    whose handler meets an unexpected shape also becomes raw, so it costs only itself.
    """
    for line in lines:
        try:
            event = line.obj
            kind = event.get("type") if event is not None else None
            if kind is None:
                if before_raw is not None:
                    before_raw()
                if event is None:
                    builder.raw(line.text, line_no=line.number)
                else:
                    builder.raw(line.text, line_no=line.number, reason="JSON without a `type`")
                continue
            handle(kind, event)
        except SHAPE_ERRORS as exc:
            builder.raw(
                line.text,
                line_no=line.number,
                reason=f"unexpected shape ({type(exc).__name__}: {exc})",
            )
