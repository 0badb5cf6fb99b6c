"""The budget ledger: every evaluation is charged, atomically and before it runs.

The ledger is a JSON file of charges under a lock (``locked_json``); what is left is
always recomputed from the charges and the config's limits, so a restart (a new
``Ledger`` on the same file) can never refill a budget.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.service.shared.config import SplitPolicy
from posttrainbench.service.shared.errors import BudgetExhausted, SplitAccessError
from posttrainbench.service.shared.locked_json import exclusive, read_model, write_model


class Charge(BaseModel):
    """One evaluation's cost, recorded before it runs."""

    model_config = ConfigDict(extra="forbid")

    charge_id: int
    split: str
    candidate: str | None
    runs: int
    samples: int
    time: str


class LedgerFile(BaseModel):
    """The ledger on disk."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    charges: list[Charge] = Field(default_factory=list)


class Usage(BaseModel):
    """Spent and remaining budget of one split (``None`` = no limit of that kind)."""

    runs_used: int
    samples_used: int
    runs_left: int | None
    samples_left: int | None


class Ledger:
    """Charges evaluations against per-split budgets stored in *path*."""

    def __init__(self, path: Path, budgets: dict[str, SplitPolicy]):
        self.path = Path(path)
        self.budgets = budgets

    def charge(
        self, split: str, *, runs: int = 1, samples: int, candidate: str | None = None
    ) -> Charge:
        """Charge one evaluation; raise ``BudgetExhausted`` (charging nothing) if it would overspend."""
        policy = self.budgets.get(split)
        if policy is None or policy.tier == "hidden":
            raise SplitAccessError(f"split {split!r} is hidden: it has no evaluation budget")
        with exclusive(self.path):
            state = read_model(self.path, LedgerFile)
            usage = _usage(state, split, policy)
            if usage.runs_left is not None and runs > usage.runs_left:
                raise BudgetExhausted(
                    f"split {split!r}: run budget exhausted ({usage.runs_used} of {policy.max_runs} used)"
                )
            if usage.samples_left is not None and samples > usage.samples_left:
                raise BudgetExhausted(
                    f"split {split!r}: sample budget exhausted ({samples} asked, {usage.samples_left} of {policy.max_samples} left)"
                )
            record = Charge(
                charge_id=len(state.charges) + 1,
                split=split,
                candidate=candidate,
                runs=runs,
                samples=samples,
                time=datetime.now(UTC).isoformat(),
            )
            state.charges.append(record)
            write_model(self.path, state)
        return record

    def usage(self) -> dict[str, Usage]:
        """Spent and remaining budget of every budgeted split."""
        with exclusive(self.path):
            state = read_model(self.path, LedgerFile)
        return {
            split: _usage(state, split, policy)
            for split, policy in self.budgets.items()
            if policy.tier != "hidden"
        }

    def charges(self) -> list[Charge]:
        """Every charge so far, oldest first."""
        with exclusive(self.path):
            return read_model(self.path, LedgerFile).charges


def _usage(state: LedgerFile, split: str, policy: SplitPolicy) -> Usage:
    runs = sum(c.runs for c in state.charges if c.split == split)
    samples = sum(c.samples for c in state.charges if c.split == split)
    return Usage(
        runs_used=runs,
        samples_used=samples,
        runs_left=None if policy.max_runs is None else max(policy.max_runs - runs, 0),
        samples_left=None if policy.max_samples is None else max(policy.max_samples - samples, 0),
    )
