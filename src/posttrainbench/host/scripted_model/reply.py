"""What the scripted model answers one request with, independent of the API's wire format."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from posttrainbench.host.scripted_model.script import Script, Turn

# Each CLI's own shell tool, most specific first (Claude Code, Codex, Gemini CLI, OpenCode).
SHELL_TOOL_NAMES = ("bash", "shell", "shell_command", "exec_command", "run_shell_command")
# Where a shell tool takes its command; an array-typed one gets `bash -lc CMD`.
COMMAND_KEYS = ("command", "cmd")
SIDE_ANSWER = "OK."


@dataclass(frozen=True)
class ToolSpec:
    """A tool the request offered: its name and JSON schema of parameters."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCall:
    """One call the reply makes."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One assistant answer: text, tool calls, and whether it ends the agent's turn."""

    text: str
    calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def finished(self) -> bool:
        """An answer without tool calls ends the agent's turn."""
        return not self.calls


class UnanswerableTurn(RuntimeError):
    """A turn cannot be answered with the tools the request offered."""


def _shell_tool(tools: list[ToolSpec]) -> ToolSpec:
    by_name = {tool.name.lower(): tool for tool in tools}
    for name in SHELL_TOOL_NAMES:
        if name in by_name:
            return by_name[name]
    offered = ", ".join(sorted(t.name for t in tools)) or "none"
    raise UnanswerableTurn(f"no shell tool among the tools offered ({offered})")


def shell_arguments(tool: ToolSpec, command: str) -> dict[str, Any]:
    """The arguments of a shell call in ``tool``'s own shape (read from its schema)."""
    properties: dict[str, Any] = tool.parameters.get("properties") or {}
    key = next((k for k in COMMAND_KEYS if k in properties), "command")
    kind = (properties.get(key) or {}).get("type")
    arguments: dict[str, Any] = {key: ["bash", "-lc", command] if kind == "array" else command}
    # Other required string fields (a description, a justification) get a plain value.
    for name in tool.parameters.get("required") or []:
        if name not in arguments and (properties.get(name) or {}).get("type") == "string":
            arguments[name] = "scripted step"
    return arguments


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class Conversation:
    """Hands out the script's turns, one per agent request, thread-safely."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._next = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def turns_used(self) -> int:
        """How many turns have been answered."""
        return self._next

    def _take(self) -> tuple[Turn, int] | None:
        with self._lock:
            if self._next >= len(self.script.turns):
                return None
            self._next += 1
            return self.script.turns[self._next - 1], self._next

    def answer(self, tools: list[ToolSpec], prompt_chars: int) -> tuple[Reply, int | None]:
        """The reply to one request that offered ``tools``, and the turn it took (from 1;
        None for a side request or once the script is used up)."""
        input_tokens = max(1, prompt_chars // 4)
        if not tools:  # a side request of the CLI: it takes no turn
            return Reply(SIDE_ANSWER, input_tokens=input_tokens, output_tokens=1), None
        taken = self._take()
        if taken is None:
            closing = self.script.closing
            reply = Reply(
                closing, input_tokens=input_tokens, output_tokens=_estimate_tokens(closing)
            )
            return reply, None
        turn, number = taken
        calls: tuple[ToolCall, ...] = ()
        call_id = f"call_ptb_{next(self._ids):04d}"
        if turn.shell is not None:
            tool = _shell_tool(tools)
            calls = (ToolCall(call_id, tool.name, shell_arguments(tool, turn.shell)),)
        elif turn.tool is not None:
            calls = (ToolCall(call_id, turn.tool, dict(turn.arguments)),)
        text = turn.text or ""
        reply = Reply(
            text,
            calls,
            input_tokens=input_tokens,
            output_tokens=_estimate_tokens(text + str([c.arguments for c in calls])),
        )
        return reply, number
