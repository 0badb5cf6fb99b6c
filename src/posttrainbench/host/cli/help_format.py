"""Help pages in plain words. Typer shows a value by its Python type (`<bool>`, `<str>`,
`<list[Path]>`); the `ptb` groups show it by what it is (PATH, N, TEXT), a flag by its name
alone and a choice by its choices. An option's own `metavar=` (ID, DIR, HOURS) always wins."""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

# Typer's type names (inside its `<...>`) and the words shown instead.
_WORDS = {
    "bool": "",
    "int": "N",
    "float": "NUM",
    "str": "TEXT",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIR",
}


def plain_type(raw: str) -> str:
    """`<int>` -> `N`, `<list[path]>` -> `PATH...`, `<a|b>` -> `[a|b]`, `<bool>` -> ``."""
    inner = raw.strip("<>")
    suffix = ""
    if inner.startswith("list[") and inner.endswith("]"):
        inner, suffix = inner[len("list[") : -1], "..."
    if "|" in inner:
        return f"[{inner}]{suffix}"
    word = _WORDS.get(inner.split(" ")[0], inner.upper())  # "int range" is an int
    return f"{word}{suffix}" if word else ""


def plain_metavars(params: list[Any], ctx: Any) -> None:
    """Give each parameter without a metavar of its own a plain one (idempotent)."""
    for param in params:
        if getattr(param, "_ptb_plain", False):
            continue
        param._ptb_plain = True
        word = "" if getattr(param, "is_flag", False) else plain_type(param.display_type(ctx))
        if param.param_type_name == "argument":
            # Typer shows an argument's type whatever its metavar: show the plain word instead.
            param.display_type_rich = lambda ctx, word=word: word
            if param.metavar is None:
                param.metavar = param.name.upper() + ("..." if param.nargs != 1 else "")
        elif param.metavar is None:
            param.metavar = word


class PtbGroup(TyperGroup):
    """A command group whose help pages, and those of its commands, use plain metavars."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The group's help, with plain metavars."""
        plain_metavars(self.get_params(ctx), ctx)
        super().format_help(ctx, formatter)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The subcommand, its parameters (help option included) given plain metavars."""
        command = super().get_command(ctx, cmd_name)
        if command is not None and not isinstance(command, PtbGroup):
            plain_metavars(command.get_params(ctx), ctx)
            if command.help:
                command.help = reflow(command.help)
        return command


def reflow(text: str) -> str:
    """A docstring's paragraphs each on one line: the help formatter keeps single newlines,
    so a docstring wrapped at 100 columns would be wrapped twice."""
    paragraphs = [" ".join(p.split()) for p in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)
