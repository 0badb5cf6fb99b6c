"""Turn a model's text into calls: ``[f(a=1), g(b="x")]`` -> ``[{"f": {"a": 1}}, ...]``.

Follows BFCL's prompt-mode decoding: strip backticks/newlines/spaces, wrap in ``[...]``
when the brackets are missing, parse with :mod:`ast`; every element must be a call with
keyword arguments. Values are resolved without ``eval``.

Stricter than BFCL where a call could hedge: a keyword given twice (Python's parser
accepts ``f(a=1, a=2)`` and BFCL keeps the last), a dict key given twice, and
positional arguments (BFCL drops them silently) are decode errors, so a completion
cannot offer several values for one parameter.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

Call = dict[str, dict[str, Any]]

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


class DecodeError(ValueError):
    """The completion is not a list of python calls."""


class HedgedCallError(DecodeError):
    """A call offers several values for one parameter (repeated keyword or key, positional extras)."""


def _dotted_name(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        raise DecodeError(f"unsupported callee {ast.unparse(node)!r}")
    return ".".join(reversed(parts))


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        if not isinstance(inner, (int, float)) or isinstance(inner, bool):
            raise DecodeError(f"cannot negate {inner!r}")
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise DecodeError("**mappings are not allowed")
            key = _value(k)
            if key in out:
                raise HedgedCallError(f"duplicate key {key!r}")
            out[key] = _value(v)
        return out
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _value(node.left), _value(node.right)
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (left, right)):
            try:
                if isinstance(node.op, ast.Pow) and abs(right) > 64:
                    raise DecodeError("exponent too large")
                return _BINOPS[type(node.op)](left, right)
            except (ArithmeticError, OverflowError) as exc:
                raise DecodeError(str(exc)) from None
        return ast.unparse(node)
    if isinstance(node, ast.Name):  # a bare variable name: BFCL keeps it as a string
        return node.id
    if isinstance(node, ast.Call):
        if not node.keywords:
            return ast.unparse(node)
        return _call(node)
    return ast.unparse(node)


def _call(node: ast.Call) -> Call:
    if node.args:
        raise HedgedCallError("positional arguments are not allowed")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise DecodeError("**kwargs are not allowed")
        if kw.arg in args:
            raise HedgedCallError(f"argument {kw.arg!r} given twice")
        args[kw.arg] = _value(kw.value)
    return {_dotted_name(node.func): args}


def decode_calls(completion: str) -> list[Call]:
    """Parse *completion* into a list of calls; raise :class:`DecodeError` if it isn't one."""
    text = completion.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    text = text.strip().strip("'")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise DecodeError(f"not python: {exc}") from None
    body = tree.body
    elements = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
    if elements is None:
        raise DecodeError("expected a list of calls")
    calls = []
    for elem in elements:
        if not isinstance(elem, ast.Call):
            raise DecodeError(f"not a call: {ast.unparse(elem)!r}")
        calls.append(_call(elem))
    return calls


def format_call(name: str, args: dict[str, Any]) -> str:
    """Inverse of decoding for plain values: ``f(a=1, b='x')`` (python literal syntax)."""
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{name}({inner})"


def cannot_become_call(prefix: str) -> bool:
    """True when no continuation of *prefix* can decode to a list of plain calls.

    Also true once a leading ``[`` has been closed and non-strippable text follows
    (``[f(a=1)] Explanation``): BFCL cannot parse that either.

    Used to stop generation early without changing any verdict: after BFCL's
    stripping/bracketing, each element must start with a (dotted) name directly followed
    by ``(``; a first token that is not ``[``/``(``/a name, or a name followed by
    anything else (``The area``, ``python\\n[``, ``x = ...``), can never parse into a
    :class:`ast.Call` with a name callee, so the completion is certainly wrong.
    """
    text = prefix.lstrip("`\n ")
    if text.startswith("[") and _closed_then_more(text):
        return True
    if text.startswith("["):
        text = text[1:].lstrip()
    if not text or text[0] == "(":
        return False
    if not (text[0] == "_" or text[0].isidentifier()):
        return True
    i = 0
    while True:  # walk a dotted name: ident ( \s* . \s* ident )*
        j = i
        while j < len(text) and (text[j] == "_" or text[j].isalnum()):
            j += 1
        k = j
        while k < len(text) and text[k].isspace():
            k += 1
        if k >= len(text):
            return False  # name (and spaces) so far; the "(" may still come
        if text[k] == "(":
            return False
        if text[k] != ".":
            return True
        k += 1
        while k < len(text) and text[k].isspace():
            k += 1
        if k >= len(text):
            return False
        if not (text[k] == "_" or text[k].isidentifier()):
            return True
        i = k


def _closed_then_more(text: str) -> bool:
    """*text* starts with ``[``; true if that bracket closes and other text follows."""
    if '"""' in text or "'''" in text:
        return False  # triple-quoted strings: don't guess
    depth, quote, escaped = 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[i + 1 :].strip("`\n ") != ""
    return False
