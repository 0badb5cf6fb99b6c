"""`ptb results export|collect|flagged` as a user runs them, including bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.host.results.store import ResultsStore
from tests.helpers import run_ptb
from tests.results_fixtures import TrialSpec, sql, write_job


def _store(tmp_path: Path) -> Path:
    write_job(
        tmp_path / "jobs",
        "sweep",
        [
            TrialSpec(score=0.6),
            TrialSpec(benchmark="bfcl", score=0.9, flagged=("benchmark_lookup",)),
            TrialSpec(agent="codex", agent_model="openai/gpt-5", score=0.4),
        ],
    )
    result = run_ptb("results", "export", str(tmp_path / "jobs"), "-o", str(tmp_path / "res"))
    assert result.returncode == 0, result.stderr
    assert "3 added, 0 updated, 0 unchanged" in result.stdout
    return tmp_path / "res"


def test_export_collect_flagged(tmp_path: Path) -> None:
    res = _store(tmp_path)
    again = run_ptb("results", "export", str(tmp_path / "jobs"), "-o", str(res), "--json")
    assert json.loads(again.stdout)["unchanged"] == 3
    collected = run_ptb("results", "collect", str(res), "--policy", "best")
    assert collected.returncode == 0, collected.stderr
    assert (
        "claude-code:anthropic/claude-opus-4-1" in collected.stdout
        and "policy best" in collected.stdout
    )
    board = json.loads((res / "leaderboard" / "leaderboard.json").read_text())
    assert board["policy"] == "best" and [a["rank"] for a in board["agents"]] == [1, 2]
    flagged = run_ptb("results", "flagged", str(res))
    assert flagged.returncode == 0
    assert "benchmark_lookup (detector): benchmark_lookup: planted finding" in flagged.stdout
    assert "1 of 3 runs flagged" in flagged.stdout
    none = run_ptb("results", "flagged", str(res), "--judge", "contamination", "--json")
    assert json.loads(none.stdout) == []


def test_bad_input_is_one_line_and_exit_2_and_keeps_what_was_written(tmp_path: Path) -> None:
    res = _store(tmp_path)
    run_ptb("results", "collect", str(res), "-o", str(tmp_path / "board"))
    before = (tmp_path / "board" / "leaderboard.json").read_text()
    bad_weights = tmp_path / "weights.json"
    bad_weights.write_text('{"weights": {"gsm8k": "heavy"}}')
    cases = [
        (("results", "collect", str(tmp_path / "nowhere")), "is not a results store"),
        (
            ("results", "collect", str(res), "--policy", "median"),
            "'median' is not one of 'latest', 'best', 'mean'",
        ),
        (
            (
                "results",
                "collect",
                str(res),
                "--weights",
                str(bad_weights),
                "-o",
                str(tmp_path / "board"),
            ),
            "weights file",
        ),
        (
            ("results", "collect", str(res), "--baselines", str(tmp_path / "missing.json")),
            "cannot read baselines",
        ),
        (("results", "flagged", str(res), "--judge", "vibes"), "'vibes' is not one of"),
        (("results", "export", str(tmp_path / "no-jobs"), "-o", str(res)), "not a directory"),
        (
            ("results", "export", str(tmp_path / "jobs"), "-o", str(tmp_path / "jobs")),
            "not an empty directory",
        ),
    ]
    for args, message in cases:
        result = run_ptb(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], (
            args,
            result.stderr,
        )
    assert (tmp_path / "board" / "leaderboard.json").read_text() == before
    assert len(ResultsStore(res).load()[0]) == 3


@pytest.mark.parametrize("damage", ["not JSON", "not a record"])
def test_a_broken_record_in_the_store_is_reported_and_skipped(tmp_path: Path, damage: str) -> None:
    res = _store(tmp_path)
    victim = sorted(row[0] for row in sql(res, "SELECT run_id FROM runs"))[0]
    broken = '{"id": "x"' if damage == "not JSON" else '{"id": "x", "status": "great"}'
    sql(res, "UPDATE runs SET record = ? WHERE run_id = ?", broken, victim)
    result = run_ptb("results", "collect", str(res))
    assert result.returncode == 0, result.stderr
    assert "warning: skipped:" in result.stderr and victim in result.stderr
    board = json.loads((res / "leaderboard" / "leaderboard.json").read_text())
    assert len(board["runs"]) == 2 and len(board["skipped"]) == 1
