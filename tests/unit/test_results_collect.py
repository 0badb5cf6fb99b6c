"""`ptb results collect`: cells, selection policies, baseline fallback, normalization, averages."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest

from posttrainbench.host.catalog.baselines import BaselineEntry
from posttrainbench.host.results.collect import collect
from posttrainbench.host.results.export import export
from posttrainbench.host.results.outputs import write_leaderboard
from posttrainbench.host.results.reference_scores import load_weights
from posttrainbench.host.results.report.render import cell_summary
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.results.table import Leaderboard
from tests.results_fixtures import T0, TrialSpec, write_job

CC = "claude-code:anthropic/claude-opus-4-1"
CX = "codex:openai/gpt-5"
PTB_BASELINES = Path(__file__).parents[1] / "fixtures" / "posttrainbench" / "baselines.json"


def _ptb(ptb_model: str, benchmark: str, section: str = "zeroshot") -> float:
    """A score of PostTrainBench's own baselines.json (the pinned copy)."""
    return json.loads(PTB_BASELINES.read_text())[section][ptb_model][benchmark]


def _board(
    tmp_path: Path, specs: list[TrialSpec], policy: str = "mean", weights=None, baselines=()
) -> Leaderboard:
    write_job(
        tmp_path / "jobs",
        f"job-{len(list((tmp_path / 'jobs').glob('*'))) if (tmp_path / 'jobs').exists() else 0}",
        specs,
    )
    export([tmp_path / "jobs"], tmp_path / "res")
    records, skipped = ResultsStore.open(tmp_path / "res", create=False).load()
    return collect(
        records,
        results_dir=tmp_path / "res",
        policy=policy,
        weights=weights or load_weights(),
        baselines=baselines,
        skipped=skipped,
    )


def _at(hours: float) -> object:
    return T0 + timedelta(hours=hours)


def test_policies_pick_explicitly_and_a_worse_retry_never_hides_a_better_run(
    tmp_path: Path,
) -> None:
    specs = [
        TrialSpec(score=0.7, started=_at(0)),
        TrialSpec(score=0.4, started=_at(11)),
        TrialSpec(score=0.55, started=_at(22)),
    ]
    mean = _board(tmp_path, specs, "mean").cell(CC, "gsm8k", "qwen3-1.7b")
    assert mean.score == pytest.approx((0.7 + 0.4 + 0.55) / 3) and len(mean.selected) == 3
    assert mean.stderr == pytest.approx(0.0866, abs=1e-4) and mean.n_runs == 3
    # Beside the runs, the questions each was scored on (issue 38 item 4).
    assert mean.n_questions == 100 and cell_summary(mean).startswith("n=3 × 100 q")
    # A 95% interval: over the runs for a mean of several (issue 38 item 10) ...
    low, high = mean.ci95
    assert low == pytest.approx(mean.score - 1.959964 * mean.stderr) and high > mean.score
    assert f"95% CI {low:.2f}–{high:.2f}" in cell_summary(mean)
    records, _ = ResultsStore.open(tmp_path / "res", create=False).load()
    best = collect(records, results_dir=tmp_path, policy="best", weights={}).cell(
        CC, "gsm8k", "qwen3-1.7b"
    )
    assert best.score == 0.7 and best.note == "best of 3 runs"
    latest = collect(records, results_dir=tmp_path, policy="latest", weights={}).cell(
        CC, "gsm8k", "qwen3-1.7b"
    )
    assert latest.score == 0.55
    # ... over the one run's questions for a single run (its metrics' standard error).
    (only,) = [r for r in records if r.score == 0.55]
    assert latest.ci95 == pytest.approx(
        [0.55 - 1.959964 * only.metrics.stderr, 0.55 + 1.959964 * only.metrics.stderr]
    )
    assert "below an earlier run (0.7000" in latest.note
    assert (latest.best, latest.latest, latest.mean) == (0.7, 0.55, mean.score)


def test_errored_retries_are_not_results_and_attempts_are_numbered(tmp_path: Path) -> None:
    board = _board(
        tmp_path,
        [
            TrialSpec(score=0.3, started=_at(0)),
            TrialSpec(error="EnvironmentStartTimeoutError", score=None, started=_at(5)),
        ],
        "latest",
    )
    cell = board.cell(CC, "gsm8k", "qwen3-1.7b")
    assert cell.score == 0.3 and cell.n_errored == 1 and cell.source == "run"
    rows = sorted(board.runs, key=lambda r: r.attempt)
    assert [(r.attempt, r.status, r.selected) for r in rows] == [
        (1, "completed", True),
        (2, "infra_error", False),
    ]


def test_baseline_stands_in_for_missing_errored_and_flagged_cells(tmp_path: Path) -> None:
    board = _board(
        tmp_path,
        [
            TrialSpec(benchmark="gsm8k", score=0.6, base_score=0.25),
            TrialSpec(benchmark="bfcl", score=0.9, base_score=0.4, flagged=("contamination",)),
            TrialSpec(
                agent="codex",
                agent_model="openai/gpt-5",
                benchmark="gsm8k",
                error="AgentError",
                score=None,
            ),
            TrialSpec(
                agent="codex",
                agent_model="openai/gpt-5",
                benchmark="bfcl",
                score=0.5,
                base_score=0.4,
            ),
        ],
    )
    # As PostTrainBench: the base model's zero-shot score of its baselines.json stands in,
    # not the base score the verifier measured next to the runs (0.4, 0.25).
    flagged = board.cell(CC, "bfcl", "qwen3-1.7b")
    bfcl_base, gsm8k_base = _ptb("Qwen3-1.7B-Base", "bfcl"), _ptb("Qwen3-1.7B-Base", "gsm8k")
    assert (flagged.source, flagged.fallback, flagged.score, flagged.n_flagged) == (
        "baseline",
        "flagged",
        bfcl_base,
        1,
    )
    errored = board.cell(CX, "gsm8k", "qwen3-1.7b")
    assert (errored.source, errored.fallback, errored.score) == ("baseline", "errored", gsm8k_base)
    assert "PostTrainBench zeroshot['Qwen3-1.7B-Base']" in errored.baseline_source
    ok = board.cell(CX, "bfcl", "qwen3-1.7b")
    assert (ok.source, ok.score) == ("run", 0.5)
    summary = {a.agent: a for a in board.agents}
    assert summary[CC].n_fallback == 1 and summary[CC].n_flagged == 1
    assert summary[CC].average == pytest.approx((0.6 + bfcl_base) / 2)
    assert summary[CX].average == pytest.approx((gsm8k_base + 0.5) / 2)


def test_baseline_stands_in_for_no_model_with_the_reason_shown(tmp_path: Path) -> None:
    board = _board(
        tmp_path,
        [
            TrialSpec(
                verifier_error="final model not found at /x", base_score=0.25, started=_at(0)
            ),
            TrialSpec(
                verifier_error="final_model rejected by the collect hook: too big",
                base_score=0.25,
                started=_at(5),
            ),
            TrialSpec(error="EnvironmentStartTimeoutError", score=None, started=_at(9)),
        ],
    )
    cell = board.cell(CC, "gsm8k", "qwen3-1.7b")
    # A run that left no model is the agent's result: it outranks the infra error.
    gsm8k_base = _ptb("Qwen3-1.7B-Base", "gsm8k")
    assert (cell.source, cell.fallback, cell.score) == ("baseline", "no_model", gsm8k_base)
    assert cell.fallback_reason == "final_model rejected by the collect hook: too big"
    assert (cell.n_runs, cell.n_no_model, cell.n_errored) == (0, 2, 1)
    assert {a.agent: a.n_no_model for a in board.agents} == {CC: 2}
    assert sorted(r.status for r in board.runs) == ["infra_error", "no_model", "no_model"]


def test_missing_cell_and_unknown_baseline(tmp_path: Path) -> None:
    board = _board(
        tmp_path,
        [
            TrialSpec(benchmark="gsm8k", model="qwen3-1.7b", score=0.6, base_score=None),
            TrialSpec(benchmark="bfcl", model="smollm2-135m", score=0.4, base_score=None),
            TrialSpec(
                agent="codex",
                agent_model="openai/gpt-5",
                benchmark="gsm8k",
                model="smollm2-135m",
                score=0.3,
                base_score=0.1,
            ),
        ],
    )
    # PostTrainBench has no number for the demo model: the verifier's measurement stands in.
    missing = board.cell(CC, "gsm8k", "smollm2-135m")
    assert (missing.source, missing.fallback, missing.score) == ("baseline", "missing", 0.1)
    assert "measured by the verifier" in missing.baseline_source
    ptb = board.cell(CX, "gsm8k", "qwen3-1.7b")  # nothing measured: PostTrainBench's number
    assert (ptb.source, ptb.score) == ("baseline", _ptb("Qwen3-1.7B-Base", "gsm8k"))
    unknown = board.cell(CX, "bfcl", "smollm2-135m")  # nothing measured, none in the catalog
    assert (unknown.source, unknown.fallback, unknown.score) == ("none", "missing", None)
    summary = {a.agent: a for a in board.agents}
    assert summary[CX].n_cells == 4 and summary[CX].n_cells_scored == 3


def test_normalized_score_is_the_share_of_the_gap_closed(tmp_path: Path) -> None:
    extra = [
        BaselineEntry(
            benchmark="gsm8k", model="qwen3-1.7b", kind="zero_shot", score=0.2, provenance="mine"
        ),
        BaselineEntry(
            benchmark="gsm8k", model="qwen3-1.7b", kind="instruct", score=0.8, provenance="mine"
        ),
    ]
    board = _board(tmp_path, [TrialSpec(score=0.5, base_score=0.3)], baselines=extra)
    cell = board.cell(CC, "gsm8k", "qwen3-1.7b")
    assert (cell.baseline, cell.instruct) == (0.2, 0.8)  # the file wins over the measured 0.3
    assert cell.normalized == pytest.approx(0.5)
    assert {(b.kind, b.score) for b in board.baselines} == {("base", 0.2), ("instruct", 0.8)}
    # Without the file: PostTrainBench's zero-shot scores of the base model and of its
    # instruct model (Qwen3-1.7B), before the base score the verifier measured (0.3).
    records, _ = ResultsStore.open(tmp_path / "res", create=False).load()
    plain = collect(records, results_dir=tmp_path, policy="mean", weights={}).cell(
        CC, "gsm8k", "qwen3-1.7b"
    )
    base, instruct = _ptb("Qwen3-1.7B-Base", "gsm8k"), _ptb("Qwen3-1.7B", "gsm8k")
    assert (plain.baseline, plain.instruct) == (base, instruct)
    assert plain.normalized == pytest.approx((0.5 - base) / (instruct - base))


def test_weighted_average_uses_the_weights_and_ranks_agents(tmp_path: Path) -> None:
    specs = [
        TrialSpec(benchmark="gsm8k", score=0.9),
        TrialSpec(benchmark="bfcl", score=0.1),
        TrialSpec(agent="codex", agent_model="openai/gpt-5", benchmark="gsm8k", score=0.2),
        TrialSpec(agent="codex", agent_model="openai/gpt-5", benchmark="bfcl", score=0.8),
    ]
    board = _board(tmp_path, specs, weights={"gsm8k": 3.0, "bfcl": 1.0})
    summary = {a.agent: a for a in board.agents}
    assert summary[CC].weighted_average == pytest.approx((3 * 0.9 + 0.1) / 4)
    assert summary[CX].weighted_average == pytest.approx((3 * 0.2 + 0.8) / 4)
    assert [a.agent for a in board.agents] == [CC, CX] and board.agents[0].rank == 1
    assert summary[CC].average == summary[CX].average == pytest.approx(0.5)
    records, _ = ResultsStore.open(tmp_path / "res", create=False).load()
    flipped = collect(
        records, results_dir=tmp_path, policy="mean", weights={"gsm8k": 1.0, "bfcl": 3.0}
    )
    assert [a.agent for a in flipped.agents] == [CX, CC]


def test_cost_tokens_gpu_hours_and_time_are_summed(tmp_path: Path) -> None:
    board = _board(
        tmp_path,
        [
            TrialSpec(
                score=0.5,
                cost_usd=2.0,
                input_tokens=100,
                output_tokens=10,
                agent_hours=4,
                gpus=1,
                started=_at(0),
            ),
            TrialSpec(
                score=0.6,
                cost_usd=3.0,
                input_tokens=200,
                output_tokens=20,
                agent_hours=8,
                gpus=1,
                started=_at(11),
            ),
            TrialSpec(
                error="AgentError",
                score=None,
                cost_usd=1.0,
                input_tokens=5,
                output_tokens=1,
                agent_hours=1,
                started=_at(22),
            ),
        ],
    )
    cell = board.cell(CC, "gsm8k", "qwen3-1.7b")
    assert (cell.cost_usd, cell.input_tokens, cell.output_tokens) == (6.0, 305, 31)
    assert cell.gpu_hours == pytest.approx(13.0) and cell.agent_hours == pytest.approx(13 / 3)
    assert cell.time_fraction == pytest.approx(13 / 30)
    (agent,) = board.agents
    assert agent.cost_usd == 6.0 and agent.agent_hours == pytest.approx(13.0)


def test_outputs_csv_and_json_round_trip(tmp_path: Path) -> None:
    board = _board(
        tmp_path, [TrialSpec(score=0.5), TrialSpec(benchmark="bfcl", flagged=("anomaly",))]
    )
    files = write_leaderboard(board, tmp_path / "out")
    assert sorted(p.name for p in files) == [
        "agents.csv",
        "cells.csv",
        "leaderboard.json",
        "runs.csv",
    ]
    again = Leaderboard.model_validate(
        json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    )
    assert again == board
    with open(tmp_path / "out" / "cells.csv", newline="") as handle:
        cells = list(csv.DictReader(handle))
    assert {(c["benchmark"], c["source"], c["fallback"]) for c in cells} == {
        ("gsm8k", "run", ""),
        ("bfcl", "baseline", "flagged"),
    }
    with open(tmp_path / "out" / "agents.csv", newline="") as handle:
        (agent,) = list(csv.DictReader(handle))
    assert float(agent["score:gsm8k"]) == 0.5 and agent["n_fallback"] == "1"
    with open(tmp_path / "out" / "runs.csv", newline="") as handle:
        runs = list(csv.DictReader(handle))
    assert sorted(r["flagged_by"] for r in runs) == ["", "anomaly"]


def test_runs_with_different_time_budgets_are_separate_entries(tmp_path: Path) -> None:
    board = _board(
        tmp_path,
        [
            TrialSpec(score=0.3, hours=1.0, agent_hours=0.9),
            TrialSpec(score=0.7, hours=10.0, agent_hours=9),
        ],
    )
    assert [a.agent for a in board.agents] == [f"{CC}@10h", f"{CC}@1h"]
    assert board.cell(f"{CC}@1h", "gsm8k", "qwen3-1.7b").score == 0.3
