"""inspect_evals' BFCL scorer, fed the way PostTrainBench's run feeds it.

Ported from inspect_evals 0.3.103 ``src/inspect_evals/bfcl/bfcl.py`` (identical to the
commit PostTrainBench pins, 06001a83) and inspect-ai 0.3.150:

* the target (``record_to_sample`` / ``parse_target``): the ground-truth string
  ``f(a=1, b='x')`` parsed with :mod:`ast`; each keyword's value by
  ``ast.literal_eval`` (a value that fails is skipped, as inspect_evals prints and
  skips it); then a JSON round trip (tuples become lists);
* the model's calls: vLLM's hermes parser (:mod:`.hermes`), then inspect-ai's
  ``model/_call_tools.py::parse_tool_call`` on each ``arguments`` string: text starting
  with ``{`` (after strip) is ``json.loads``-ed (a parse error leaves ``{}``); any other
  text is ``yaml.safe_load``-ed and given to the *first* parameter of the tool of that
  name (nothing when the tool is unknown or parameterless);
* ``bfcl_scorer``: correct iff the one assistant message has exactly one tool call, its
  function equals the target's and its arguments ``==`` the target's arguments (Python
  equality of the parsed JSON: ``5 == 5.0``, key order ignored, no string
  normalisation, optional parameters count like any other).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

from .hermes import extract_tool_calls
from .tools import first_parameter


@dataclass(frozen=True)
class Verdict:
    correct: bool
    error_type: str | None
    detail: str


def parse_target(ground_truth: str) -> dict[str, Any]:
    """inspect_evals' ``parse_target`` + the JSON round trip in ``record_to_sample``."""
    body = ast.parse(ground_truth, mode="single").body
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        raise ValueError(f"not one call: {ground_truth!r}")
    call = body[0].value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
        raise ValueError(f"not a keyword call of a plain name: {ground_truth!r}")
    arguments: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:  # **kwargs: no name to compare
            continue
        try:
            arguments[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError):
            continue
    return json.loads(json.dumps({"function": call.func.id, "arguments": arguments}))


def _yaml_scalar(text: str) -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - inspect-ai requires PyYAML; JSON is close
        return json.loads(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_arguments(name: str, arguments: str | None, tools: list[dict[str, Any]]) -> dict:
    """inspect-ai 0.3.150 ``parse_tool_call``'s ``arguments`` dict."""
    text = (arguments or "").strip()
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return {}
    param = first_parameter(tools, name) if name and tools else None
    return {} if param is None else {param: _yaml_scalar(text)}


def tool_call_string(function: str, arguments: dict[str, Any]) -> str:
    """inspect_evals' ``tool_call_to_string`` (the score's ``answer``)."""
    return f"{function}({', '.join(f'{k}={v}' for k, v in arguments.items())})"


def score_completion(
    completion: str, target: dict[str, Any], tools: list[dict[str, Any]]
) -> Verdict:
    """The BFCL verdict on one raw completion (the text vLLM generated)."""
    extracted = extract_tool_calls(completion)
    calls = extracted.tool_calls if extracted.tools_called else ()
    if len(calls) != 1:
        kind = "no_tool_call" if not calls else "wrong_count"
        return Verdict(False, kind, f"tool calls: {len(calls)}")
    call = calls[0]
    args = parse_arguments(call.name, call.arguments, tools)
    answer = tool_call_string(call.name, args)
    if call.name != target["function"]:
        return Verdict(False, "wrong_func_name", answer)
    if args != target["arguments"]:
        return Verdict(False, "wrong_arguments", answer)
    return Verdict(True, None, answer)
