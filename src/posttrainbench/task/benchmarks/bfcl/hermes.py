"""vLLM's ``hermes`` tool-call parser, non-streaming: completion text -> tool calls.

A port of ``Hermes2ProToolParser.extract_tool_calls`` (vLLM 0.11.0,
``vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py``), which
PostTrainBench's BFCL run selects with ``--enable-auto-tool-choice --tool-call-parser
hermes`` (``llama3_json`` for llama models, not ported: llama3.jinja is not shipped,
so those models cannot be evaluated here or there). ``serving_chat.py`` calls it on the
whole completion because the request has tools and ``tool_choice="auto"``:

* no ``<tool_call>`` in the text: no tool calls, the text is the message content;
* otherwise every match of ``<tool_call>(.*?)</tool_call>|<tool_call>(.*)`` (DOTALL:
  a closed call, or an unclosed one running to the end of the text) is ``json.loads``-ed
  (surrounding whitespace is fine); each must be an object with a string ``name`` and
  an ``arguments`` member of any JSON type, which is re-serialised with
  ``json.dumps(..., ensure_ascii=False)`` (the OpenAI ``arguments`` string). The
  content is the text before the first ``<tool_call>`` (None if empty);
* if any match fails (invalid JSON, an empty ``<tool_call></tool_call>``, a non-object,
  a missing key, a non-string name: vLLM catches every exception), there are **no**
  tool calls at all and the whole text is the content.

Text around the calls is allowed and ignored; json.loads keeps the last of repeated keys.
Stdlib only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

TOOL_CALL_START = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


@dataclass(frozen=True)
class FunctionCall:
    """One extracted call: ``arguments`` is the JSON text vLLM puts in the response."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Extracted:
    """``ExtractedToolCallInformation``: whether tools were called, the calls, the content."""

    tools_called: bool
    tool_calls: tuple[FunctionCall, ...]
    content: str | None


def _call(raw: str) -> FunctionCall:
    obj = json.loads(raw)
    name = obj["name"]  # TypeError for a non-object, KeyError when missing
    if not isinstance(name, str):  # pydantic's FunctionCall(name: str) rejects it
        raise TypeError("name is not a string")
    return FunctionCall(name, json.dumps(obj["arguments"], ensure_ascii=False))


def extract_tool_calls(model_output: str) -> Extracted:
    """What vLLM's hermes parser makes of a whole completion."""
    if TOOL_CALL_START not in model_output:
        return Extracted(False, (), model_output)
    try:
        calls = tuple(
            _call(closed if closed else unclosed)
            for closed, unclosed in _TOOL_CALL.findall(model_output)
        )
    except Exception:  # vLLM: logger.exception(...); no tool calls
        return Extracted(False, (), model_output)
    content = model_output[: model_output.find(TOOL_CALL_START)]
    return Extracted(True, calls, content if content else None)


def cannot_become_single_call(prefix: str) -> bool:
    """True when no continuation of *prefix* can leave exactly one parsed tool call.

    The first match of the pattern is fixed once its ``</tool_call>`` is there: if it
    does not parse, every continuation parses to no calls; if it does, any later
    ``<tool_call>`` adds a second call (or makes the parse fail). Either way the BFCL
    scorer says incorrect, so generation may stop (a speed-up that changes no verdict).
    """
    start = prefix.find(TOOL_CALL_START)
    if start < 0:
        return False
    end = prefix.find(TOOL_CALL_END, start + len(TOOL_CALL_START))
    if end < 0:
        return False
    try:
        _call(prefix[start + len(TOOL_CALL_START) : end])
    except Exception:
        return True
    return TOOL_CALL_START in prefix[end + len(TOOL_CALL_END) :]
