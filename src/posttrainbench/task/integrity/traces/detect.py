"""Which agent wrote a trace, judged from its content (never from the file name)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from posttrainbench.task.integrity.traces.events import TraceFormat
from posttrainbench.task.integrity.traces.harbor_atif import is_atif
from posttrainbench.task.integrity.traces.jsonl import parse_object

SNIFF_LINES = 200  # JSON lines looked at; the first few decide in practice

_CODEX_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    }
)
_OPENCODE_TYPES = frozenset(
    {"step_start", "step_finish", "text", "reasoning", "tool_use", "error", "user"}
)


def line_vote(obj: dict[str, Any]) -> TraceFormat | None:
    """The format one JSONL object belongs to, or None when it is not characteristic."""
    kind = obj.get("type")
    if kind in _CODEX_TYPES:
        return "codex"
    if "part" in obj and kind in _OPENCODE_TYPES or "sessionID" in obj and kind in _OPENCODE_TYPES:
        return "opencode"
    if kind in ("assistant", "user") and isinstance(obj.get("message"), dict):
        return "claude-code"
    if kind == "system" and obj.get("subtype") == "init":
        return "claude-code"
    if kind == "result" and ("total_cost_usd" in obj or "num_turns" in obj):
        return "claude-code"
    if kind == "init" and "session_id" in obj:
        return "gemini-cli"
    if kind == "message" and "role" in obj and "content" in obj:
        return "gemini-cli"
    if kind == "tool_use" and "tool_name" in obj or kind == "tool_result" and "tool_id" in obj:
        return "gemini-cli"
    if kind == "result" and "stats" in obj:
        return "gemini-cli"
    return None


def detect_format(text: str) -> TraceFormat | None:
    """The trace format of *text*, or None when no known format matches (callers fall back to raw)."""
    return _sniff(text, first_vote_wins=False)


def is_known_format(text: str) -> bool:
    """Whether `detect_format(text)` is not None, stopping at the first line that votes: a
    trace scan only needs to know that some format matches, not which wins."""
    return _sniff(text, first_vote_wins=True) is not None


def _sniff(text: str, *, first_vote_wins: bool) -> TraceFormat | None:
    stripped = text.lstrip()  # blank lines vote for nothing: skipping them changes no vote
    lines = _lines(stripped)
    first = parse_object(next(lines, ""))
    if stripped.startswith("{") and first is None:
        # A multi-line JSON document: only ATIF trajectories are single documents.
        try:
            doc = json.loads(stripped)
        except ValueError:
            doc = None
        if is_atif(doc):
            return "harbor"
    votes: Counter[str] = Counter()
    seen = 0
    for obj in itertools.chain([first], map(parse_object, lines)):
        if obj is None:
            continue
        if is_atif(obj):  # a trajectory written on one line
            return "harbor"
        vote = line_vote(obj)
        if vote is not None:
            if first_vote_wins:
                return vote  # type: ignore[return-value]
            votes[vote] += 1
        seen += 1
        if seen >= SNIFF_LINES:
            break
    if not votes:
        return None
    return votes.most_common(1)[0][0]  # type: ignore[return-value]


def _lines(text: str) -> Iterator[str]:
    """*text*'s lines, one at a time: a trace can be hundreds of megabytes, and only its
    first lines are looked at (io.StringIO would first copy it whole, at 4 bytes a char)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start : end + 1]
        start = end + 1
