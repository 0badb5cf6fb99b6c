"""The normalized trace: one event list whatever agent produced it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EventKind = Literal[
    "message",  # text from the user, the assistant or the system
    "tool_call",  # the agent asked for a tool (name + input)
    "tool_result",  # what a tool returned
    "shell",  # a shell command the agent ran (also emitted for shell tool calls)
    "file_read",  # a file the agent read
    "file_write",  # a file the agent created or edited
    "url",  # a URL the agent fetched or searched for
    "usage",  # token usage / cost reported by the agent
    "raw",  # a line that could not be parsed (fallback)
]
TraceFormat = Literal["claude-code", "codex", "gemini-cli", "opencode", "harbor", "raw"]


class TokenUsage(BaseModel):
    """Tokens and cost, summed over a trace (or reported by one event)."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None


class TraceEvent(BaseModel):
    """One thing that happened in an agent run."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0, description="position in the normalized list")
    kind: EventKind
    role: Literal["user", "assistant", "system", "tool"] | None = None
    text: str | None = Field(default=None, description="message text, tool output or raw line")
    tool: str | None = Field(default=None, description="tool name for tool_call/tool_result")
    tool_input: dict | None = None
    command: str | None = Field(default=None, description="shell command line")
    path: str | None = Field(default=None, description="file path for file_read/file_write")
    url: str | None = None
    usage: TokenUsage | None = None
    model: str | None = None
    timestamp: str | None = None


class NormalizedTrace(BaseModel):
    """A parsed trace: its format, its events and the summed usage."""

    model_config = ConfigDict(extra="forbid")

    format: TraceFormat
    source: str | None = Field(default=None, description="file the trace was read from")
    events: list[TraceEvent] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    warnings: list[str] = Field(default_factory=list)

    def of_kind(self, kind: EventKind) -> list[TraceEvent]:
        """The events of one kind, in order."""
        return [e for e in self.events if e.kind == kind]

    def shell_commands(self) -> list[str]:
        """Every shell command line, in order."""
        return [e.command for e in self.events if e.kind == "shell" and e.command]

    def urls(self) -> list[str]:
        """Every URL fetched or searched, in order."""
        return [e.url for e in self.events if e.kind == "url" and e.url]
