"""The agent's actions as searchable text: trace events and its code snapshot.

Detectors search what the agent *did* (shell commands, URLs, files it read or wrote,
tool inputs, and raw lines when a trace could not be parsed), never what it was told
or what a tool printed, so a rule in the prompt or a package's source code in a tool
result cannot flag a run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.task.integrity.traces.events import NormalizedTrace

# Code-like files of the snapshot the detectors read.
CODE_SUFFIXES = frozenset(
    {".py", ".sh", ".ipynb", ".js", ".ts", ".bash", ".toml", ".yaml", ".yml", ".cfg", ""}
)
# Installed third-party code is not the agent's own.
VENDORED_PARTS = frozenset(
    {"site-packages", "dist-packages", "node_modules", ".venv", "venv", "__pycache__"}
)
MAX_CODE_FILE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Action:
    """One searchable piece of what the agent did."""

    kind: str  # shell | url | file_read | file_write | tool_call | raw | code
    text: str
    location: str  # 'trace FILE event N' or 'snapshot PATH line N'
    tool: str | None = None


def trace_actions(traces: list[NormalizedTrace]) -> list[Action]:
    """Actions from every trace, deduplicated by (kind, text)."""
    seen: set[tuple[str, str]] = set()
    out: list[Action] = []
    for trace in traces:
        name = Path(trace.source).name if trace.source else "trace"
        # A tool call whose input is already a shell/url/file event is not searched twice.
        derived = {
            e.command or e.url or e.path
            for e in trace.events
            if e.kind in ("shell", "url", "file_read", "file_write")
        }
        for event in trace.events:
            if (
                event.kind == "tool_call"
                and event.tool_input
                and any(isinstance(v, str) and v in derived for v in event.tool_input.values())
            ):
                continue
            for kind, text in _event_texts(event):
                if not text or (kind, text) in seen:
                    continue
                seen.add((kind, text))
                out.append(Action(kind, text, f"trace {name} event {event.index}", event.tool))
    return out


def _event_texts(event) -> Iterator[tuple[str, str]]:
    if event.kind == "shell" and event.command:
        yield "shell", event.command
    elif event.kind == "url" and event.url:
        yield "url", event.url
    elif event.kind in ("file_read", "file_write") and event.path:
        yield event.kind, event.path
    elif event.kind == "tool_call":
        if event.tool_input:
            yield "tool_call", json.dumps(event.tool_input, ensure_ascii=False)
        if event.command:
            yield "shell", event.command
    elif event.kind == "raw" and event.text:
        yield "raw", event.text


def snapshot_code_files(snapshot: Path | None) -> list[Path]:
    """The agent's own code files in the snapshot (no installed packages, no manifest)."""
    if snapshot is None or not snapshot.is_dir():
        return []
    out = []
    for root, dirs, files in os.walk(snapshot):
        dirs[:] = sorted(d for d in dirs if d not in VENDORED_PARTS)
        for name in sorted(files):
            path = Path(root) / name
            if name == "MANIFEST.json" or path.suffix.lower() not in CODE_SUFFIXES:
                continue
            if path.stat().st_size <= MAX_CODE_FILE_BYTES:
                out.append(path)
    return out


def code_actions(snapshot: Path | None) -> list[Action]:
    """Every non-empty line of the agent's code files, as actions of kind 'code'."""
    out: list[Action] = []
    for path in snapshot_code_files(snapshot):
        rel = path.relative_to(snapshot)  # type: ignore[arg-type]
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                out.append(Action("code", line, f"snapshot {rel} line {number}"))
    return out


def run_actions(ctx, det) -> list[Action]:
    """The trace's and the code snapshot's actions; what is missing is noted in `det`."""
    actions: list[Action] = []
    if ctx.has_traces:
        actions += trace_actions(ctx.traces)
    else:
        det.missing.append("agent trace (no agent logs found)")
    if ctx.inputs.code_snapshot is not None and ctx.inputs.code_snapshot.is_dir():
        actions += code_actions(ctx.inputs.code_snapshot)
    else:
        det.add("inputs", False, "no code snapshot: only the trace was searched")
    return actions
