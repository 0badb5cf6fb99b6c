"""`ptb traces show`: read an agent trace (any supported agent) and print it readably."""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.options import Json
from posttrainbench.task.integrity.traces.events import TraceFormat

app = typer.Typer(
    help="Inspect agent traces (Claude Code, Codex, Gemini CLI, OpenCode, Harbor).",
    no_args_is_help=True,
)


@app.command("show")
def show(
    file: Path = typer.Argument(
        ...,
        metavar="PATH",
        help="A trace file, or a Harbor trial directory (its best trace is shown).",
    ),
    fmt: TraceFormat | None = typer.Option(
        None, "-f", "--format", help="Force a format (default: detected)."
    ),
    as_json: bool = Json,
    max_chars: int = typer.Option(
        2000,
        "--max-chars",
        metavar="N",
        help="Cut each message and tool output to this many characters (0: no limit).",
    ),
) -> None:
    """Print a trace as numbered events with a usage summary, or as normalized JSON.

    Example: ptb traces show ptb-runs/<run id>/jobs/<run id>/<trial>
    """
    from rich.console import Console
    from rich.markup import escape

    from posttrainbench.task.integrity.traces.load import (
        check_format,
        parse_trace,
        parse_trial_trace,
    )
    from posttrainbench.task.integrity.traces.render import render_trace

    check_format(fmt)
    if max_chars < 0:
        raise PtbError(f"invalid --max-chars {max_chars}: must be 0 (no limit) or more")
    if file.is_dir():
        trace, refused = parse_trial_trace(file, fmt)
        err = Console(stderr=True)
        for line in refused:  # what the agent left that is not read: links, FIFOs, hard links
            err.print(f"warning: refused: {escape(line)}", highlight=False, soft_wrap=True)
    else:
        trace = parse_trace(file, fmt)
    if as_json:
        typer.echo(trace.model_dump_json(indent=2))
    else:
        typer.echo(render_trace(trace, max_chars=max_chars), nl=False)
