"""`ptb demo`: the offline end-to-end run on the embedded default."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from posttrainbench.errors import PtbError
from posttrainbench.runner.preflight import check_local_sandbox


def demo(
    runs_dir: Path = typer.Option(Path("ptb-runs"), "--runs-dir", help="Where the demo run is written."),
    limit: int = typer.Option(50, "--limit", help="BFCL questions scored for both models."),
    train_minutes: float = typer.Option(3.5, "--train-minutes", help="Training time of the reference solution."),
) -> None:
    """Post-train SmolLM2-135M for BFCL offline on this machine and compare with the base model."""
    from posttrainbench.runner.demo import DemoSettings, run_demo

    check_local_sandbox()
    console = Console()
    console.print(
        "[bold]ptb demo[/]: BFCL x SmolLM2-135M, reference solution (oracle agent), local sandbox.\n"
        "The first run builds the task environment (Python packages, base model) and caches it."
    )
    result = asyncio.run(run_demo(DemoSettings(runs_dir=runs_dir, limit=limit, train_minutes=train_minutes)))
    table = Table("model", f"BFCL simple_python accuracy (n={result.n or '?'})")
    table.add_row("base (SmolLM2-135M)", _pct(result.base_score))
    table.add_row("post-trained (final_model)", _pct(result.final_score))
    console.print(table)
    console.print(f"time: {result.seconds / 60:.1f} min; results: {Path(result.record.job_dir)}")
    console.print(f"run record: {result.record.path}")
    if result.error or result.final_score is None:
        raise PtbError(f"the demo trial did not produce a score: {result.error}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
