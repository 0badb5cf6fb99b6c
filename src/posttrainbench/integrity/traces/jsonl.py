"""Splitting a JSONL trace into lines, each parsed or not."""

from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional


class JsonLine(NamedTuple):
    """One non-blank line: its 1-based number, its text, and its JSON object (None if not one)."""

    number: int
    text: str
    obj: Optional[dict[str, Any]]


def parse_object(line: str) -> Optional[dict[str, Any]]:
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
