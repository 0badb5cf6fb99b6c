"""Prompt for BFCL in prompt ("Prompt" model) mode, condensed from BFCL's classic prompt.

The system message lists the functions as JSON and asks for ``[func(param=value)]``
only. The training data generator uses the same builder, so train and test prompts match.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

SYSTEM_TEMPLATE = (
    "You are an expert in composing functions. Given a question and a set of possible "
    "functions, make the function call that achieves the purpose. Return only the call, "
    "in the format [func_name(param_name1=param_value1, param_name2=param_value2)], "
    "with no other text.\nFunctions (JSON):\n{functions}"
)


def functions_json(functions: Sequence[dict]) -> str:
    """BFCL's own function docs as compact JSON (one line per function)."""
    return "\n".join(json.dumps(f, ensure_ascii=False, separators=(",", ":")) for f in functions)


def build_messages(functions: Sequence[dict], user_turns: Sequence[dict]) -> list[dict[str, str]]:
    """System prompt with the function docs, then the question's turns."""
    system = SYSTEM_TEMPLATE.format(functions=functions_json(functions))
    return [{"role": "system", "content": system}] + [
        {"role": t["role"], "content": t["content"]} for t in user_turns
    ]
