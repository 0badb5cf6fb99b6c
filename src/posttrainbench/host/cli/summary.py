"""Print what a run produced."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from posttrainbench.host.runner.record import RunRecord


def print_trials(console: Console, record: RunRecord) -> None:
    """One row per trial: its outcome, reward and (unless scored) the reason, so a trial
    that left no model says why rather than showing a bare 0."""
    table = Table("trial", "outcome", "reward", "reason")
    for trial in record.trials:
        reward = "-" if trial.reward is None else f"{trial.reward:.3f}"
        reason = trial.error or (
            "" if trial.outcome in (None, "completed") else "(no reason given)"
        )
        table.add_row(trial.trial_name, trial.outcome or "-", reward, reason)
    console.print(table)
    console.print(f"status: {record.status}; run record: {record.path}")
