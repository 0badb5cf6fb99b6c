"""Gemini ``generateContent`` / ``streamGenerateContent?alt=sse``, as Gemini CLI calls them."""

from __future__ import annotations

from typing import Any

from posttrainbench.host.scripted_model.reply import Reply, ToolSpec
from posttrainbench.host.scripted_model.sse import Event

# Gemini CLI's side checks ask for JSON ("who speaks next"); this answer ends the turn.
JSON_SIDE_ANSWER = '{"reasoning": "The scripted model has finished.", "next_speaker": "user"}'


def _schema(declaration: dict[str, Any]) -> dict[str, Any]:
    schema = declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}
    return schema if isinstance(schema, dict) else {}


def tools(body: dict[str, Any]) -> list[ToolSpec]:
    """The function declarations a request offers."""
    out = []
    for tool in body.get("tools") or []:
        for declaration in (tool or {}).get("functionDeclarations") or []:
            if isinstance(declaration, dict) and "name" in declaration:
                out.append(ToolSpec(declaration["name"], _lower_types(_schema(declaration))))
    return out


def _lower_types(schema: dict[str, Any]) -> dict[str, Any]:
    # Gemini schemas may spell types in capitals (STRING, ARRAY).
    properties = {
        name: prop | ({"type": prop["type"].lower()} if isinstance(prop.get("type"), str) else {})
        for name, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, dict)
    }
    return schema | {"properties": properties}


def wants_json(body: dict[str, Any]) -> bool:
    """Whether the request asks for a JSON answer (a side check, not the agent's loop)."""
    config = body.get("generationConfig") or {}
    return config.get("responseMimeType") == "application/json"


def content(reply: Reply, model: str, response_id: str) -> dict[str, Any]:
    """One GenerateContentResponse: the whole answer in one candidate."""
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    for call in reply.calls:
        parts.append(
            {"functionCall": {"id": call.call_id, "name": call.name, "args": call.arguments}}
        )
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": reply.input_tokens,
            "candidatesTokenCount": reply.output_tokens,
            "totalTokenCount": reply.input_tokens + reply.output_tokens,
        },
        "modelVersion": model,
        "responseId": response_id,
    }


def events(reply: Reply, model: str, response_id: str) -> list[Event]:
    """The stream: one ``data:`` event holding the whole answer (as the API may send it)."""
    return [Event(None, content(reply, model, response_id))]
