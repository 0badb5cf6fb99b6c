"""`ptb rescore STORE`: score stored models again with the current verifier and judges."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Literal, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.options import Json, runs_dir_option, split_ids

# rescore.run.RescoreEnv (not imported here: that module loads Harbor, slow at startup).
RescoreEnvName = Literal["local", "docker"]

_STATUS_TEXT = {
    "rescored": "re-scored",
    "already_rescored": "already re-scored",
    "already_current": "already current",
    "failed": "FAILED",
}


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def rescore(
    store: Path = typer.Argument(..., help="A results store (from `ptb results export`)."),
    benchmark: list[str] = typer.Option(
        [],
        "-b",
        "--benchmark",
        metavar="ID",
        show_default=False,
        help="Only runs of this benchmark; repeatable, or comma-separated.",
    ),
    run: list[str] = typer.Option(
        [],
        "--run",
        metavar="ID",
        show_default=False,
        help="Only this run id or trial name (repeatable).",
    ),
    env: RescoreEnvName = typer.Option(
        "local", "-e", "--env", help="Where the re-score trials run: local (sandbox) or docker."
    ),
    runs_dir: Path = runs_dir_option(
        Path("ptb-rescore"), "Where the re-score trials and their compiled tasks are kept."
    ),
    as_json: bool = Json,
) -> None:
    """Re-score stored models with the current task version, keeping the old scores.

    Each selected run's stored final_model (exported with `ptb results export
    --with-final-model`) and code snapshot go through a real trial of the current task, in
    the same kind of separate environment as the original trial; the new score is stored
    as a run linked to the original, which stays. Runs already scored by the current
    version are skipped; running the command again re-scores nothing twice.

    Example: ptb rescore results/ -b gsm8k
    """
    from posttrainbench.host.rescore.run import RESCORE_ENVS, RescoreEnv, RescoreRequest
    from posttrainbench.host.rescore.run import rescore as run_rescore

    if env not in RESCORE_ENVS:
        raise PtbError(f"unknown --env {env!r}; choose one of: {', '.join(RESCORE_ENVS)}")
    err = Console(stderr=True)
    # Harbor's job progress goes to stderr: stdout is the summary (--json parses it).
    with contextlib.redirect_stdout(sys.stderr):
        summary = run_rescore(
            RescoreRequest(
                store=store,
                runs_dir=runs_dir,
                env=cast(RescoreEnv, env),
                benchmarks=split_ids(benchmark),
                run_ids=run,
            ),
            say=lambda line: err.print(escape(line), highlight=False, soft_wrap=True),
        )
    if as_json:
        typer.echo(summary.model_dump_json(indent=2))
    else:
        table = Table(title=f"re-scored in {summary.store}")
        for column in ("run", "agent", "benchmark", "base model", "status", "old", "new"):
            table.add_column(column)
        for item in summary.items:
            table.add_row(
                item.id[:8],
                escape(item.agent),
                item.benchmark,
                item.base_model,
                _STATUS_TEXT[item.status] + (f": {escape(item.detail)}" if item.detail else ""),
                f"{_score(item.old_score)} ({item.old_version or 'unversioned'})",
                f"{_score(item.new_score)} ({item.new_version})",
            )
        Console(width=max(Console().width, 120)).print(table)
        for item in summary.items:  # why a run was scored again: what its task's change was
            if item.changed:
                err.print(
                    f"{item.id[:8]}: {item.old_version} -> {item.new_version} changed "
                    f"{', '.join(item.changed[:8])}"
                    + (f" and {len(item.changed) - 8} more" if len(item.changed) > 8 else ""),
                    highlight=False,
                    soft_wrap=True,
                )
        for refused in summary.not_rescorable:
            err.print(
                f"not re-scorable: {refused.id[:8]} ({escape(refused.agent)}, "
                f"{refused.benchmark}): {escape(refused.why)}",
                highlight=False,
                soft_wrap=True,
            )
    if any(item.status == "failed" for item in summary.items):
        raise typer.Exit(1)
