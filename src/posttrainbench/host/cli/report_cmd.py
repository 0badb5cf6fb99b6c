"""`ptb report RESULTS_DIR -o report.html`: the results as one static, offline HTML file."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.host.cli.options import out_option
from posttrainbench.host.cli.results_cmd import (
    AllVersionsOpt,
    BaselinesOpt,
    PolicyOpt,
    WeightsOpt,
    build_leaderboard,
)
from posttrainbench.host.results.table import Policy


def report(
    results_dir: Path = typer.Argument(..., help="A results store (from `ptb results export`)."),
    out: Path = out_option(..., "The HTML file to write (replaced atomically)."),
    policy: Policy = PolicyOpt,
    weights: Path | None = WeightsOpt,
    baselines: Path | None = BaselinesOpt,
    all_versions: bool = AllVersionsOpt,
    max_events: int = typer.Option(
        200,
        "--max-events",
        min=1,
        metavar="N",
        help="Trace events shown per run (the rest is cut).",
    ),
    max_chars: int = typer.Option(
        2000,
        "--max-chars",
        min=100,
        metavar="N",
        help="Characters shown per trace event (head and tail kept).",
    ),
) -> None:
    """Write the leaderboard, charts and a page per run (verdicts, trace) into one HTML file.

    Example: ptb report results/ -o report.html
    """
    from posttrainbench.host.results.report.render import (
        check_output_path,
        render_report,
        write_report,
    )

    # Check the destination first, so a bad -o fails before any work and touches nothing.
    check_output_path(out)
    board, records = build_leaderboard(results_dir, policy, weights, baselines, all_versions)
    html = render_report(board, records, results_dir, max_events=max_events, max_chars=max_chars)
    write_report(html, out)
    for line in board.skipped:
        Console(stderr=True).print(
            f"warning: skipped: {escape(line)}", highlight=False, soft_wrap=True
        )
    Console().print(
        f"report written to {escape(str(out))} ({len(board.agents)} agents, {len(board.runs)} runs)",
        highlight=False,
        soft_wrap=True,
    )
