"""`ptb demo`: the offline end-to-end run on the embedded default."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import typer
from rich import get_console
from rich.console import Console
from rich.table import Table

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.options import TrainSteps, runs_dir_option
from posttrainbench.host.runner.preflight import check_local_sandbox
from posttrainbench.task.schemas import VerifierProgress

PHASE_LABELS = {"final_model": "verifier: post-trained model", "base_model": "verifier: base model"}
PRINT_EVERY_S = 10.0
# What the reference fine-tune prints (task/training/sft_bfcl.py): "step 10 loss 0.1871 151s".
TRAINING_LINE = re.compile(r"^step \d+ loss [\d.]+ \d+s$")


def demo(
    runs_dir: Path = runs_dir_option(Path("ptb-runs"), "Where the demo run is written."),
    limit: int = typer.Option(
        50, "--limit", metavar="N", help="BFCL questions scored for both models."
    ),
    train_steps: int | None = TrainSteps,
) -> None:
    """Post-train SmolLM2-135M for BFCL offline on this machine and compare with the base model.

    Example: ptb demo --limit 20
    """
    from posttrainbench.host.runner.demo import DemoSettings, run_demo

    check_local_sandbox()
    console = get_console()  # the console Harbor's live job display uses
    console.print(
        "[bold]ptb demo[/]: BFCL x SmolLM2-135M, reference solution (oracle agent), local sandbox.\n"
        "The first run builds the task environment (Python packages, base model) and caches it."
    )
    settings = DemoSettings(runs_dir=runs_dir, limit=limit, train_steps=train_steps)
    result = asyncio.run(
        run_demo(
            settings,
            on_progress=_VerifierLines(console),
            on_agent_line=lambda line: _training_line(console, line),
        )
    )
    console.line()  # Harbor's job display may end without one: the table starts a line
    table = Table("model", f"BFCL exec_simple accuracy (n={result.n})", "± stderr")
    table.add_row("base (SmolLM2-135M)", _pct(result.base_score), _pct(result.base_stderr))
    table.add_row("post-trained (final_model)", _pct(result.final_score), _pct(result.final_stderr))
    console.print(table)
    _print_training(console, result.training)
    if (
        result.final_score is not None
        and result.base_score is not None
        and result.final_score <= result.base_score
    ):
        console.print("[yellow]warning:[/] the post-trained model did not beat the base model")
    console.print(f"time: {result.seconds / 60:.1f} min; results: {Path(result.record.job_dir)}")
    console.print(f"run record: {result.record.path}")
    if result.error or result.final_score is None:
        raise PtbError(f"the demo trial did not produce a score: {result.error}")


class _VerifierLines:
    """Prints the verifier's progress as it scores: one line per model every few seconds.

    Lines, not a live bar of our own: Harbor's job display is already live on the same
    console, and rich keeps printed lines above it (two live displays would garble it).
    """

    def __init__(self, console: Console, every_s: float = PRINT_EVERY_S):
        self.console = console
        self.every_s = every_s
        self._last: tuple[str, int] | None = None  # (phase, attempt) of the last line
        self._printed_at = 0.0

    def __call__(self, state: VerifierProgress) -> None:
        now = time.monotonic()
        new_run = self._last != (state.phase, state.attempt)
        finished = state.done == state.total
        if not (new_run or finished or now - self._printed_at >= self.every_s):
            return
        self._last, self._printed_at = (state.phase, state.attempt), now
        retry = (
            f" (attempt {state.attempt}, {state.max_new_tokens} tokens)"
            if state.attempt > 1
            else ""
        )
        self.console.print(
            f"{PHASE_LABELS[state.phase]}{retry}: {state.done}/{state.total} questions, "
            f"{state.questions_per_min:.1f} questions/min, {state.elapsed_s:.0f}s",
            highlight=False,
        )


def _training_line(console: Console, line: str) -> None:
    """A line of the reference fine-tune's log worth showing: its steps, loss and time."""
    if TRAINING_LINE.match(line):
        console.print(f"reference fine-tune: {line.strip()}", highlight=False)


def _print_training(console: Console, training) -> None:
    if training is None:
        return
    took = (
        f" in {training.train_seconds / 60:.1f} min" if training.train_seconds is not None else ""
    )
    console.print(f"reference fine-tune: {training.steps} steps{took}")
    if training.stopped_early:
        console.print(
            f"[yellow]warning:[/] the fine-tune hit its time cap after {training.steps} of "
            f"{training.steps_planned} steps: the machine was too busy to finish it"
        )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
