"""Print what a run produced."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from posttrainbench.runner.record import RunRecord


def print_trials(console: Console, record: RunRecord) -> None:
    """One row per trial: reward or error, and where its files are."""
    table = Table("trial", "reward", "error")
    for trial in record.trials:
        reward = "-" if trial.reward is None else f"{trial.reward:.3f}"
        table.add_row(trial.trial_name, reward, trial.error or "")
    console.print(table)
    console.print(f"status: {record.status}; run record: {record.path}")
