"""Budget ledger: atomic charges, no overspend under threads and processes, no refill on restart."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import threading

import pytest

from posttrainbench.service.api.ledger import Ledger
from posttrainbench.service.shared.config import SplitPolicy
from posttrainbench.service.shared.errors import BudgetExhausted, SplitAccessError
from tests.helpers import REPO

BUDGETS = {
    "train": SplitPolicy(tier="viewable", max_runs=5, max_samples=1000),
    "dev": SplitPolicy(tier="aggregate", max_samples=30, min_samples=5),
    "test": SplitPolicy(tier="hidden"),
}


def test_charges_until_exhausted_and_records_each(tmp_path):
    ledger = Ledger(tmp_path / "ledger.json", BUDGETS)
    for i in range(5):
        charge = ledger.charge("train", samples=3, candidate=f"candidate-{i}")
        assert charge.charge_id == i + 1 and charge.candidate == f"candidate-{i}" and charge.time
    with pytest.raises(BudgetExhausted, match="run budget exhausted"):
        ledger.charge("train", samples=1, candidate="candidate-9")
    usage = ledger.usage()["train"]
    assert (usage.runs_used, usage.runs_left, usage.samples_used) == (5, 0, 15)
    assert len(ledger.charges()) == 5  # the refused charge left no trace
    assert stat.S_IMODE((tmp_path / "ledger.json").stat().st_mode) == 0o600


def test_sample_budget_refuses_what_does_not_fit(tmp_path):
    ledger = Ledger(tmp_path / "ledger.json", BUDGETS)
    ledger.charge("dev", samples=20)
    with pytest.raises(BudgetExhausted, match="11 asked, 10 of 30 left"):
        ledger.charge("dev", samples=11)
    ledger.charge("dev", samples=10)
    assert ledger.usage()["dev"].samples_left == 0 and ledger.usage()["dev"].runs_left is None


def test_hidden_and_unknown_splits_cannot_be_charged(tmp_path):
    ledger = Ledger(tmp_path / "ledger.json", BUDGETS)
    for split in ("test", "nope"):
        with pytest.raises(SplitAccessError, match="hidden"):
            ledger.charge(split, samples=1)


def test_restart_never_refills(tmp_path):
    Ledger(tmp_path / "ledger.json", BUDGETS).charge("train", samples=2, candidate="candidate-1")
    Ledger(tmp_path / "ledger.json", BUDGETS).charge("train", samples=2)
    again = Ledger(tmp_path / "ledger.json", BUDGETS)
    assert again.usage()["train"].runs_left == 3
    assert [c.candidate for c in again.charges()] == ["candidate-1", None]


def test_threads_never_overspend(tmp_path):
    ledger = Ledger(tmp_path / "ledger.json", BUDGETS)
    outcomes: list[str] = []

    def worker() -> None:
        for _ in range(4):
            try:
                Ledger(ledger.path, BUDGETS).charge("dev", samples=1)
                outcomes.append("ok")
            except BudgetExhausted:
                outcomes.append("refused")

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 30 and outcomes.count("refused") == 18
    assert ledger.usage()["dev"].samples_used == 30
    assert [c.charge_id for c in ledger.charges()] == list(range(1, 31))


CHILD = """
import json, sys
from posttrainbench.service.shared.config import SplitPolicy
from posttrainbench.service.shared.errors import BudgetExhausted
from posttrainbench.service.api.ledger import Ledger
ledger = Ledger(sys.argv[1], {"dev": SplitPolicy(tier="aggregate", max_samples=30, min_samples=5)})
ok = 0
for _ in range(20):
    try:
        ledger.charge("dev", samples=1, candidate=sys.argv[2]); ok += 1
    except BudgetExhausted:
        pass
print(json.dumps(ok))
"""


def test_processes_never_overspend(tmp_path):
    path = tmp_path / "ledger.json"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), f"p{i}"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    granted = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sum(granted) == 30  # 80 attempts, exactly the budget granted
    charges = Ledger(path, BUDGETS).charges()
    assert len(charges) == 30 and sorted(c.charge_id for c in charges) == list(range(1, 31))
    assert {c.candidate for c in charges} <= {"p0", "p1", "p2", "p3"}
