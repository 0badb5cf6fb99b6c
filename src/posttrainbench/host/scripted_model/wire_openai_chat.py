"""OpenAI Chat Completions (``POST /v1/chat/completions``): chunks, then ``[DONE]``."""

from __future__ import annotations

import json
import time
from typing import Any

from posttrainbench.host.scripted_model.reply import Reply, ToolSpec
from posttrainbench.host.scripted_model.sse import Event


def tools(body: dict[str, Any]) -> list[ToolSpec]:
    """The function tools a request offers."""
    out = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and "name" in function:
            out.append(ToolSpec(function["name"], function.get("parameters") or {}))
    return out


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for index, call in enumerate(reply.calls)
    ]


def _finish(reply: Reply) -> str:
    return "stop" if reply.finished else "tool_calls"


def completion(reply: Reply, model: str, completion_id: str) -> dict[str, Any]:
    """The whole completion, for a request without ``stream``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [
            {k: v for k, v in call.items() if k != "index"} for call in _tool_calls(reply)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": _usage(reply),
    }


def events(reply: Reply, model: str, completion_id: str) -> list[Event]:
    """The stream: role, text, tool calls, finish reason, usage, ``[DONE]``."""
    head = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return Event(None, head | {"choices": [choice]})

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        out.append(chunk({"content": reply.text}))
    if reply.calls:
        out.append(chunk({"tool_calls": _tool_calls(reply)}))
    out.append(chunk({}, _finish(reply)))
    out.append(Event(None, head | {"choices": [], "usage": _usage(reply)}))
    out.append(Event(None, "[DONE]"))
    return out
