"""Anthropic Messages (``POST /v1/messages``), as Claude Code calls it: streamed events."""

from __future__ import annotations

import json
from typing import Any

from posttrainbench.host.scripted_model.reply import Reply, ToolSpec
from posttrainbench.host.scripted_model.sse import Event


def tools(body: dict[str, Any]) -> list[ToolSpec]:
    """The client tools a request offers (server tools such as web search have no schema)."""
    return [
        ToolSpec(t["name"], t.get("input_schema") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t and "input_schema" in t
    ]


def _content(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        blocks.append(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message(reply: Reply, model: str, message_id: str) -> dict[str, Any]:
    """The whole message, for a request without ``stream``."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply),
        "stop_reason": "end_turn" if reply.finished else "tool_use",
        "stop_sequence": None,
        "usage": _usage(reply),
    }


def events(reply: Reply, model: str, message_id: str) -> list[Event]:
    """The stream: message_start, one start/delta/stop per block, message_delta, message_stop."""
    start = message(reply, model, message_id) | {"content": [], "stop_reason": None}
    start["usage"] = _usage(reply) | {"output_tokens": 1}
    out = [Event("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(_content(reply)):
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = block | {"input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out += [
            Event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            ),
            Event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            Event("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    out += [
        Event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "end_turn" if reply.finished else "tool_use",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": reply.output_tokens},
            },
        ),
        Event("message_stop", {"type": "message_stop"}),
    ]
    return out
