"""The script a scripted model answers from: a YAML list of turns, one per agent request.

Each request that offers tools (the agent's own loop) takes the next turn; requests
without tools (titles, summaries, "who speaks next" checks that some CLIs make on the
side) get a short fixed answer and take none. Once the turns run out, every answer is
the script's closing text.

A turn is one of:

- ``shell: CMD``: a call of the agent's own shell tool, whatever the CLI names it
  (``Bash``, ``shell``, ``run_shell_command``, ``bash``, ...); the argument shape is read
  from the tool's schema in the request, so one script fits every CLI;
- ``tool: NAME`` with ``arguments: {...}``: a call of one named tool, as given;
- ``text: ...``: an assistant message; with ``finish: true`` (the default for a text
  turn) it ends the agent's turn.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from posttrainbench.core.errors import PtbError

DEFAULT_SCRIPTS_PACKAGE = "posttrainbench.host.scripted_model.scripts"
FALLBACK_CLOSING = "Done."


class ScriptError(PtbError):
    """A script file is missing, not YAML, or not a list of valid turns."""


class Turn(BaseModel):
    """One answer of the scripted model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str | None = Field(default=None, description="assistant text (with a call: said first)")
    shell: str | None = Field(default=None, description="a command for the agent's shell tool")
    tool: str | None = Field(default=None, description="the name of a tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the named tool's input")

    @model_validator(mode="after")
    def _one_kind(self) -> Turn:
        if self.shell is not None and self.tool is not None:
            raise ValueError("a turn calls either `shell` or `tool`, not both")
        if self.shell is None and self.tool is None and not self.text:
            raise ValueError("a turn needs `text`, `shell` or `tool`")
        if self.arguments and self.tool is None:
            raise ValueError("`arguments` belong to a `tool` turn")
        return self

    @property
    def calls_tool(self) -> bool:
        """Whether the turn asks the agent to run a tool (else it ends the agent's turn)."""
        return self.shell is not None or self.tool is not None


class Script(BaseModel):
    """The turns, and the text every request gets once they are used up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turns: list[Turn] = Field(min_length=1)
    closing: str = FALLBACK_CLOSING


def parse_script(text: str, source: str) -> Script:
    """A script from YAML text: a mapping with ``turns`` (and ``closing``), or a bare list."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScriptError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from exc
    if isinstance(data, list):
        data = {"turns": data}
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ScriptError(f"{source}: {where}: {first['msg']}") from exc


def load_script(path: Path) -> Script:
    """Read a script file; one clear error when it is missing or malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"cannot read script {path}: {exc.strerror or exc}") from exc
    return parse_script(text, str(path))


def default_script_text(agent: str) -> str:
    """The YAML of the default script shipped for ``agent`` (the same for every CLI)."""
    del agent  # one script fits all: `shell` turns adapt to each CLI's shell tool
    return resources.files(DEFAULT_SCRIPTS_PACKAGE).joinpath("honest_agent.yaml").read_text()


def default_script(agent: str) -> Script:
    """The default script for ``agent``: what a minimal honest agent does."""
    return parse_script(default_script_text(agent), f"default script of {agent}")
