"""What a tool call did: shell commands, files read or written, URLs fetched or searched.

Every agent names its tools differently (Claude Code `Bash`/`Read`, Codex `exec_command`,
Gemini CLI `run_shell_command`/`read_file`, OpenCode `bash`/`read`, Terminus
`bash_command`, ...). This module maps a (tool name, tool input) pair to the actions the
judges care about, so the parsers stay about their own file format.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal, NamedTuple

ActionKind = Literal["shell", "file_read", "file_write", "url"]


class ToolAction(NamedTuple):
    """One action derived from a tool call: its kind and its value (command, path or URL)."""

    kind: ActionKind
    value: str


SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "run_shell_command",
        "exec_command",
        "command_execution",
        "bash_command",
        "local_shell",
        "local_shell_call",
        "shell_command",
        "execute_bash",
        "execute_command",
        "run_command",
        "terminal",
    }
)
READ_TOOLS = frozenset({"read", "read_file", "read_many_files", "notebookread", "view"})
WRITE_TOOLS = frozenset(
    {
        "write",
        "edit",
        "multiedit",
        "notebookedit",
        "write_file",
        "replace",
        "edit_file",
        "create_file",
        "patch",
        "apply_patch",
        "file_change",
    }
)
FETCH_TOOLS = frozenset({"webfetch", "web_fetch", "fetch", "fetch_url"})
SEARCH_TOOLS = frozenset(
    {"websearch", "web_search", "google_web_search", "web_search_call", "search_web"}
)

# Keys under which agents put a command line, a file path or a URL in a tool's input.
_COMMAND_KEYS = ("command", "cmd", "keystrokes", "script")
_PATH_KEYS = (
    "file_path",
    "filePath",
    "path",
    "absolute_path",
    "notebook_path",
    "target_file",
    "filename",
)
_URL_KEYS = ("url", "uri")
_QUERY_KEYS = ("query", "q", "search_query")
_PATCH_KEYS = ("input", "patch", "patchText", "patch_text")

# An http(s) URL inside free text (a shell command, a prompt). Stops at whitespace, quotes
# and shell punctuation; trailing sentence punctuation is trimmed afterwards.
_URL_RE = re.compile(r"https?://[^\s'\"<>`|;(){}\[\]\\]+")
_PATCH_FILE_RE = re.compile(
    r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.MULTILINE
)
_SHELLS = frozenset(
    {"bash", "sh", "zsh", "dash", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh"}
)


def base_tool_name(name: str) -> str:
    """The tool's own name, lower case: `mcp__server__fetch` -> `fetch`, `functions.Bash` -> `bash`."""
    short = name.rsplit("__", 1)[-1].rsplit(".", 1)[-1]
    return short.strip().lower()


def urls_in_text(text: str) -> list[str]:
    """Every distinct http(s) URL in *text*, in order of appearance."""
    found: list[str] = []
    for match in _URL_RE.finditer(text):
        url = match.group(0).rstrip(".,:;!?'\"")
        if url not in found and len(url) > len("https://"):
            found.append(url)
    return found


def command_line(value: object) -> str | None:
    """A shell command from a tool input value: a string, or an argv list (`bash -lc X` -> X)."""
    if isinstance(value, str):
        return value.strip() or None  # Terminus keystrokes end with a newline
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) >= 3 and value[0] in _SHELLS and value[1] in ("-c", "-lc", "-ic"):
            return value[2]
        return shlex.join(value)
    return None


def shell_command(tool_input: dict) -> str | None:
    """The command line in a shell tool's input, if any."""
    for key in _COMMAND_KEYS:
        command = command_line(tool_input.get(key))
        if command:
            return command
    return None


def patch_paths(patch: str) -> list[str]:
    """Files named in an `apply_patch`-style patch (`*** Add/Update/Delete File: PATH`)."""
    paths: list[str] = []
    for match in _PATCH_FILE_RE.finditer(patch):
        path = (match.group(1) or match.group(2)).strip()
        if path and path not in paths:
            paths.append(path)
    return paths


def file_paths(tool_input: dict) -> list[str]:
    """The file paths a file tool's input names (single path, a `paths` list, or a patch)."""
    paths: list[str] = []
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            paths.append(value)
            break
    many = tool_input.get("paths")
    if isinstance(many, list):
        paths.extend(p for p in many if isinstance(p, str) and p.strip())
    if not paths:
        for key in _PATCH_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and "*** " in value:
                paths.extend(patch_paths(value))
                break
    return paths


def _stripped_strings(tool_input: dict, keys: tuple[str, ...]) -> list[str]:
    """The non-blank string values of *keys* in *tool_input*, stripped, in key order."""
    values = (tool_input.get(key) for key in keys)
    return [v.strip() for v in values if isinstance(v, str) and v.strip()]


def _web_targets(tool_input: dict, *, search: bool) -> list[str]:
    targets = _stripped_strings(tool_input, _URL_KEYS)
    # Gemini's web_fetch takes a prompt that contains the URLs.
    prompt = tool_input.get("prompt")
    if not targets and isinstance(prompt, str):
        targets.extend(urls_in_text(prompt))
    if search or not targets:
        queries = _stripped_strings(tool_input, _QUERY_KEYS)
        many = tool_input.get("queries")
        if isinstance(many, list):
            queries.extend(q.strip() for q in many if isinstance(q, str) and q.strip())
        targets.extend(f"search:{q}" for q in queries)
    return targets


def derive_actions(name: str, tool_input: dict | None) -> list[ToolAction]:
    """The shell/file/url actions a tool call stands for (empty for other tools)."""
    tool_input = tool_input if isinstance(tool_input, dict) else {}
    tool = base_tool_name(name)
    actions: list[ToolAction] = []
    if tool in SHELL_TOOLS:
        command = shell_command(tool_input)
        if command:
            actions.append(ToolAction("shell", command))
            actions.extend(ToolAction("url", u) for u in urls_in_text(command))
        return actions
    if tool in READ_TOOLS:
        return [ToolAction("file_read", p) for p in file_paths(tool_input)]
    if tool in WRITE_TOOLS:
        return [ToolAction("file_write", p) for p in file_paths(tool_input)]
    if tool in FETCH_TOOLS or tool in SEARCH_TOOLS:
        return [ToolAction("url", t) for t in _web_targets(tool_input, search=tool in SEARCH_TOOLS)]
    # Any other tool (an MCP browser, a custom fetcher) that is handed a URL still fetched it.
    for key in _URL_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            actions.append(ToolAction("url", value))
    return actions
