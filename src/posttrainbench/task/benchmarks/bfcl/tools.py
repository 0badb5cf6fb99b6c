"""BFCL function docs -> the OpenAI ``tools`` list PostTrainBench's chat template renders.

A port of what happens to one ``record["function"]`` entry on its way to the chat
template in PostTrainBench's BFCL run:

1. inspect_evals 0.3.103, ``src/inspect_evals/bfcl/bfcl.py`` (``bfcl_solver`` ->
   ``create_tool_info_from_dict`` / ``create_tool_param`` / ``get_type``): a
   ``ToolInfo(name, description, ToolParams(properties, required))`` whose parameters
   are JSON-schema objects; BFCL's types map ``dict``->``object``, ``float``->``number``,
   ``tuple``->``array``; a property whose value is None is dropped; ``properties`` and
   ``items`` are kept only when truthy; ``required`` defaults to ``[]``.
2. inspect-ai 0.3.150, ``model/_openai.py::openai_chat_tool_param``:
   ``{"type": "function", "function": {"name", "description",
   "parameters": ToolParams.model_dump(exclude_none=True)}}``. ``ToolParams``
   (``tool/_tool_params.py``) dumps ``type`` ("object"), ``properties``, ``required``,
   ``additionalProperties`` (False) in that order; each property is a ``JSONSchema``
   (``util/_json.py``) whose non-None fields dump in the order ``type, format,
   description, default, enum, items, properties, additionalProperties, anyOf,
   required``. The request also carries ``tool_choice="auto"`` (``model/_model.py``).
3. vLLM 0.11.0, ``entrypoints/openai/serving_chat.py``: ``tool_dicts =
   [tool.model_dump() for tool in request.tools]`` (``ChatCompletionToolsParam``:
   ``type``, ``function`` = ``FunctionDefinition(name, description, parameters)``),
   passed as ``tools=`` to ``apply_hf_chat_template`` (``entrypoints/chat_utils.py``),
   i.e. to ``tokenizer.apply_chat_template(..., tools=...)``.

Key order is kept throughout (JSON objects in, dicts out), and templates print the
tools with ``tojson`` (qwen3, gemma3_tool_calling) or ``string`` (smollm), so the order
here is the order the model sees. Stdlib only.
"""

from __future__ import annotations

import json
from typing import Any

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
# JSONSchema's fields in declaration order (inspect-ai 0.3.150 util/_json.py)
_SCHEMA_FIELDS = (
    "type",
    "format",
    "description",
    "default",
    "enum",
    "items",
    "properties",
    "additionalProperties",
    "anyOf",
    "required",
)


def json_type(bfcl_type: str | None) -> str | None:
    """inspect_evals' ``get_type``: BFCL's type name as a JSON-schema type."""
    if bfcl_type is None:
        return None
    mapped = {"dict": "object", "float": "number", "tuple": "array"}.get(bfcl_type, bfcl_type)
    if mapped not in JSON_TYPES:
        raise ValueError(f"Invalid type: {bfcl_type}")  # inspect_evals asserts the same
    return mapped


def tool_param(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """``create_tool_param`` then ``JSONSchema.model_dump(exclude_none=True)``."""
    if spec is None:
        return None
    fields: dict[str, Any] = {
        "type": json_type(spec.get("type")),
        "description": spec.get("description"),
        "default": spec.get("default"),
        "enum": spec.get("enum"),
        "items": tool_param(spec["items"]) if spec.get("items") else None,
        "properties": (
            {k: tool_param(v) for k, v in spec["properties"].items() if v is not None}
            if spec.get("properties")
            else None
        ),
        "additionalProperties": spec.get("additionalProperties"),
        "required": spec.get("required"),
    }
    return {k: fields[k] for k in _SCHEMA_FIELDS if fields.get(k) is not None}


def openai_tool(function: dict[str, Any]) -> dict[str, Any]:
    """One BFCL function doc as the tool dict vLLM hands the chat template."""
    parameters = tool_param(function.get("parameters"))
    if parameters is None or "properties" not in parameters:
        # create_tool_info_from_dict asserts both
        raise ValueError(f"{function.get('name')!r}: no parameter properties")
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function["description"],
            "parameters": {
                "type": "object",
                "properties": parameters["properties"],
                "required": parameters.get("required") or [],
                "additionalProperties": False,
            },
        },
    }


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tools=`` for the chat template: one entry per function, in the record's order."""
    return [openai_tool(f) for f in functions]


def tools_json(functions: list[dict[str, Any]]) -> str:
    """:func:`openai_tools` as JSON text: how a prepared sample keeps it.

    Prepared splits are written with sorted keys, and the key order is part of the
    prompt, so the tool list is stored as one string.
    """
    return json.dumps(openai_tools(functions), ensure_ascii=False)


def first_parameter(tools: list[dict[str, Any]], name: str) -> str | None:
    """The first parameter of the tool called *name* (None if unknown or parameterless).

    inspect-ai's ``parse_tool_call`` maps a non-object ``arguments`` to it.
    """
    for tool in tools:
        function = tool["function"]
        if function["name"] == name and function["parameters"]["properties"]:
            return next(iter(function["parameters"]["properties"]))
    return None
