"""Prompt for BFCL in prompt ("Prompt" model) mode, condensed from BFCL's classic prompt.

The system message lists the functions as JSON and asks for ``[func(param=value)]``
only. The training data generator uses the same builder, so train and test prompts match.
"""

from __future__ import annotations

import json
from typing import Sequence

SYSTEM_TEMPLATE = (
    "You are an expert in composing functions. You are given a question and a set of "
    "possible functions. Based on the question, make the function call(s) that achieve "
    "the purpose.\n"
    "Return only the function calls, in the format "
    "[func_name(param_name1=param_value1, param_name2=param_value2)]. "
    "Do not include any other text.\n\n"
    "Here is a list of functions in JSON format that you can invoke.\n{functions}\n"
)


def functions_json(functions: Sequence[dict]) -> str:
    """BFCL's own function docs as compact JSON (one line per function)."""
    return "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)


def build_messages(functions: Sequence[dict], user_turns: Sequence[dict]) -> list[dict[str, str]]:
    """System prompt with the function docs, then the question's turns."""
    system = SYSTEM_TEMPLATE.format(functions=functions_json(functions))
    return [{"role": "system", "content": system}] + [
        {"role": t["role"], "content": t["content"]} for t in user_turns
    ]
