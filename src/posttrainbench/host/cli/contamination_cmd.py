"""`ptb contamination check`: n-gram overlap of training data with a benchmark's test set."""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainbench.host.cli.options import Json
from posttrainbench.task.integrity.contamination.command import (
    EXIT_CLEAN,
    EXIT_CONTAMINATED,
    render_report,
    resolve_reference,
    run_check,
)

app = typer.Typer(
    help="Check training data for contamination with a benchmark's test set.", no_args_is_help=True
)


@app.command("check")
def check(
    inputs: list[Path] = typer.Option(
        ...,
        "-i",
        "--input",
        metavar="PATH",
        help="file or directory (repeatable; more paths may follow as arguments)",
    ),
    more: list[Path] | None = typer.Argument(
        None, metavar="PATH...", help="more files or directories", show_default=False
    ),
    reference: str | None = typer.Option(
        None,
        "-r",
        "--reference",
        metavar="FILE",
        help="TEST.json: a JSON array of {question, answer} objects",
    ),
    as_json: bool = Json,
    workers: int | None = typer.Option(
        None, "--workers", metavar="N", help="processes (default: one per CPU)"
    ),
) -> None:
    """Report training records whose n-grams cover a test item (exit 1 when any does).

    Example: ptb contamination check -i train.jsonl -r test.json
    """
    report = run_check(resolve_reference(reference), [*inputs, *(more or [])], workers)
    typer.echo(report.model_dump_json(indent=2) if as_json else render_report(report))
    raise typer.Exit(EXIT_CONTAMINATED if report.contaminated else EXIT_CLEAN)
