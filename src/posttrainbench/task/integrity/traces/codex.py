"""Codex traces: `codex exec --json` (Harbor's `agent/codex.txt`).

One JSON object per line: `thread.started`, `turn.started`, `item.started` /
`item.updated` / `item.completed` with an `item` (agent_message, reasoning,
command_execution, file_change, web_search, mcp_tool_call, todo_list, error),
`turn.completed` with the turn's `usage`, `turn.failed` and `error`. Older releases
named the item's type `item_type` and the message `assistant_message`; both are read.
"""

from __future__ import annotations

from typing import Any

from posttrainbench.task.integrity.traces.builder import TraceBuilder, as_text, to_int
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage
from posttrainbench.task.integrity.traces.jsonl import dispatch_events, json_lines


def openai_usage(usage: Any) -> TokenUsage | None:
    """TokenUsage from Codex's turn usage (its input_tokens include the cached ones)."""
    if not isinstance(usage, dict):
        return None
    cached = to_int(usage.get("cached_input_tokens"))
    return TokenUsage(
        input_tokens=max(to_int(usage.get("input_tokens")) - cached, 0),
        output_tokens=to_int(usage.get("output_tokens")),
        cache_read_tokens=cached,
    )


def parse_codex(text: str) -> NormalizedTrace:
    """Parse a Codex `exec --json` trace."""
    builder = TraceBuilder("codex")
    # A command is announced by item.started and finished by item.completed: emit the call
    # when the item is first seen (so a command killed mid-run still counts) and its
    # output when it completes.
    announced: set[str] = set()

    def handle(kind: Any, event: dict[str, Any]) -> None:
        if kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                _item(builder, item, completed=kind == "item.completed", announced=announced)
        elif kind == "turn.completed":
            usage = openai_usage(event.get("usage"))
            if usage is not None:
                builder.usage(usage)
        elif kind == "turn.failed":
            builder.message(
                "system", f"turn failed: {as_text((event.get('error') or {}).get('message'))}"
            )
        elif kind == "error":
            builder.message("system", f"error: {as_text(event.get('message'))}")

    dispatch_events(json_lines(text), builder, handle)
    return builder.build()


def _item(builder: TraceBuilder, item: dict, *, completed: bool, announced: set[str]) -> None:
    item_type = item.get("type") or item.get("item_type")
    item_id = str(item.get("id") or "")
    first_sight = not item_id or item_id not in announced
    if item_id:
        announced.add(item_id)

    if item_type in ("agent_message", "assistant_message"):
        if completed:
            builder.message("assistant", as_text(item.get("text")))
    elif item_type == "reasoning":
        if completed:
            builder.reasoning(as_text(item.get("text")))
    elif item_type == "command_execution":
        if first_sight:
            builder.tool_call(
                "command_execution", {"command": item.get("command")}, call_id=item_id or None
            )
        if completed:
            output = as_text(item.get("aggregated_output"))
            if item.get("exit_code") not in (None, 0):
                output = f"{output}\n[exit code {item.get('exit_code')}]".lstrip()
            builder.tool_result(output, call_id=item_id or None)
    elif item_type == "file_change":
        if completed:  # emitted once, when the patch has been applied (or failed)
            builder.tool_call(
                "file_change", {"changes": item.get("changes")}, call_id=item_id or None
            )
            for change in item.get("changes") or []:
                if isinstance(change, dict) and isinstance(change.get("path"), str):
                    builder.file_access("file_write", change["path"], tool="file_change")
            if item.get("status") == "failed":
                builder.tool_result("[error] patch failed", call_id=item_id or None)
    elif item_type == "web_search":
        if completed:  # the query may still be empty when the search starts
            args = {k: v for k, v in item.items() if k not in ("id", "type", "action")}
            action = item.get("action")  # newer releases: {"type": "search"|"open_page", ...}
            if isinstance(action, dict):
                args.update({k: action[k] for k in ("query", "queries", "url") if action.get(k)})
            builder.tool_call("web_search", args, call_id=item_id or None)
    elif item_type == "mcp_tool_call":
        name = f"mcp__{item.get('server')}__{item.get('tool')}"
        if first_sight:
            builder.tool_call(name, item.get("arguments"), call_id=item_id or None)
        if completed:
            error = item.get("error")
            if isinstance(error, dict) and error.get("message"):
                builder.tool_result(f"[error] {error['message']}", call_id=item_id or None)
            else:
                result = item.get("result") or {}
                builder.tool_result(
                    result.get("content") if isinstance(result, dict) else result,
                    call_id=item_id or None,
                )
    elif item_type == "todo_list":
        if completed:
            todos = [t.get("text") for t in item.get("items") or [] if isinstance(t, dict)]
            builder.message("assistant", "plan: " + "; ".join(str(t) for t in todos if t))
    elif item_type == "error":
        if completed:
            builder.message("system", f"error: {as_text(item.get('message'))}")
