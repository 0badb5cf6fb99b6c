"""AST checker for BFCL ``simple_python`` (our own implementation of BFCL's rules).

A decoded completion is correct when it is exactly one call and:

* the function name equals the documented name (dots included);
* every required parameter is present and no parameter is unknown (not in the schema
  or not in the possible answer);
* each value has the documented type (``int`` is accepted for ``float``; tuples are
  compared as lists; a value of the possible answers' own type is accepted as a
  "variable" and then compared exactly);
* each value equals one of the possible answers: strings after
  :func:`standardize_string` (case, spaces and ``,./-_*^`` ignored), lists element-wise
  with the same string rule, dicts key by key, lists of dicts position by position;
* a parameter left out must have ``""`` among its possible answers (optional).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .decode import Call

PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_NESTED = ("array", "tuple")
_IGNORED_CHARS = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class Check:
    valid: bool
    error_type: str | None = None
    detail: str = ""


OK = Check(True)


def standardize_string(text: str) -> str:
    """Lower-case, drop spaces and ``,./-_*^``, and turn ``'`` into ``"``."""
    return _IGNORED_CHARS.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def _answer_type(alternatives: list) -> type | None:
    for alt in alternatives:
        if alt != "":
            return type(alt)
    return None


def _check_type(
    value: Any, alternatives: list, expected: type, nested: type | None
) -> Check | bool:
    """Return a failing Check, or the ``is_variable`` flag when the type is acceptable."""
    answer_type = _answer_type(alternatives)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return is_variable
        for alt in alternatives:
            if type(alt) is not list:
                return is_variable
            inner_type = _answer_type(alt)
            if all(type(v) is nested or type(v) is inner_type for v in value):
                return is_variable
    if answer_type is not None and type(value) is answer_type:
        return True  # a "variable": compared exactly below
    return Check(False, "type_error", f"expected {expected.__name__}, got {type(value).__name__}")


def _check_dict(value: dict, alternatives: list) -> Check:
    for alt in alternatives:
        if alt == "" or not isinstance(alt, dict):
            continue
        if any(k not in alt for k in value):
            continue
        if any(_std(v) not in [_std(a) for a in alt[k]] for k, v in value.items()):
            continue
        if any(k not in value and "" not in alts for k, alts in alt.items()):
            continue
        return OK
    return Check(False, "value_error:dict", f"{value!r} matches no possible dict")


def _check_list_of_dicts(value: list, alternatives: list) -> Check:
    for alt in alternatives:
        if not isinstance(alt, list) or len(alt) != len(value):
            continue
        if all(isinstance(v, dict) and _check_dict(v, [a]).valid for v, a in zip(value, alt)):
            return OK
    return Check(False, "value_error:list_dict", f"{value!r} matches no possible list of dicts")


def _check_value(param: str, value: Any, spec: dict, alternatives: list) -> Check:
    type_name = spec.get("type", "any")
    expected = PY_TYPES.get(type_name, str)
    nested = None
    if type_name in _NESTED:
        nested = PY_TYPES.get(spec.get("items", {}).get("type", "any"), str)
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:
        value = float(value)
    verdict = _check_type(value, alternatives, expected, nested)
    if isinstance(verdict, Check):
        return Check(False, verdict.error_type, f"{param}: {verdict.detail}")
    if not verdict:  # not a variable: compare with BFCL's per-type rules
        if expected is dict:
            return _check_dict(value, alternatives)
        if expected is list and nested is dict:
            return _check_list_of_dicts(value, alternatives)
        if expected is str:
            ok = standardize_string(value) in [
                standardize_string(a) for a in alternatives if type(a) is str
            ]
            return (
                OK
                if ok
                else Check(
                    False, "value_error:string", f"{param}={value!r} not in {alternatives!r}"
                )
            )
        if expected is list:
            std_alts = [[_std(x) for x in a] for a in alternatives if isinstance(a, list)]
            ok = [_std(x) for x in value] in std_alts
            return (
                OK
                if ok
                else Check(False, "value_error:list", f"{param}={value!r} not in {alternatives!r}")
            )
    if value not in alternatives:
        return Check(False, "value_error:others", f"{param}={value!r} not in {alternatives!r}")
    return OK


def check_simple_call(function: dict, calls: list[Call], ground_truth: list[dict]) -> Check:
    """Check decoded *calls* against one documented *function* and its possible answer."""
    if len(calls) != 1:
        return Check(False, "wrong_count", f"expected 1 call, got {len(calls)}")
    name = function["name"]
    call = calls[0]
    if name not in call:
        return Check(False, "wrong_func_name", f"expected {name!r}, got {next(iter(call))!r}")
    args = call[name]
    params = function["parameters"].get("properties", {})
    possible = next(iter(ground_truth[0].values()))
    for req in function["parameters"].get("required", []):
        if req not in args:
            return Check(False, "missing_required", f"missing {req!r}")
    for param, value in args.items():
        if param not in params or param not in possible:
            return Check(False, "unexpected_param", f"unexpected {param!r}")
        result = _check_value(param, value, params[param], possible[param])
        if not result.valid:
            return result
    for param, alternatives in possible.items():
        if param not in args and "" not in alternatives:
            return Check(False, "missing_optional", f"{param!r} must be given")
    return OK
