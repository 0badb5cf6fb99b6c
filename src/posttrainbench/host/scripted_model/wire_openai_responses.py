"""OpenAI Responses (``POST /v1/responses``), as Codex and OpenCode call it: typed events."""

from __future__ import annotations

import json
import time
from typing import Any

from posttrainbench.host.scripted_model.reply import Reply, ToolSpec
from posttrainbench.host.scripted_model.sse import Event


def tools(body: dict[str, Any]) -> list[ToolSpec]:
    """The function tools a request offers (Responses tools are flat: name + parameters)."""
    return [
        ToolSpec(t["name"], t.get("parameters") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("type") == "function" and "name" in t
    ]


def _items(reply: Reply, response_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{call.call_id}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
        )
    return items


def response(reply: Reply, model: str, response_id: str) -> dict[str, Any]:
    """The whole response, for a request without ``stream`` (and inside ``response.completed``)."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": _items(reply, response_id),
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def events(reply: Reply, model: str, response_id: str) -> list[Event]:
    """created, in_progress, then each output item added/streamed/done, then completed."""
    whole = response(reply, model, response_id)
    pending = whole | {"status": "in_progress", "output": [], "usage": None}
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> Event:
        return Event(kind, {"type": kind, "sequence_number": next(seq), **fields})

    out = [
        event("response.created", response=pending),
        event("response.in_progress", response=pending),
    ]
    for index, item in enumerate(whole["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            opened = item | {"status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": []}
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            out += [
                event("response.output_item.added", output_index=index, item=opened),
                event("response.content_part.added", **ids, part=part),
                event("response.output_text.delta", **ids, delta=text),
                event("response.output_text.done", **ids, text=text),
                event("response.content_part.done", **ids, part=part | {"text": text}),
            ]
        else:
            opened = item | {"status": "in_progress", "arguments": ""}
            out += [
                event("response.output_item.added", output_index=index, item=opened),
                event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=item["arguments"],
                ),
                event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                ),
            ]
        out.append(event("response.output_item.done", output_index=index, item=item))
    out.append(event("response.completed", response=whole))
    return out
