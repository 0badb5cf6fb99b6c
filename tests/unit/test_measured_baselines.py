"""`ptb baseline` measurements: kept with machine and date, listed, used by the leaderboard."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from posttrainbench.core.errors import PtbError
from posttrainbench.host.data.measured_baselines import (
    MeasuredBaseline,
    load_measured,
    measured_entries,
    measured_path,
    record_measured,
)
from posttrainbench.host.results.reference_scores import ReferenceScores
from tests.helpers import run_ptb


def _measured(score: float, limit: int | None = None) -> MeasuredBaseline:
    return MeasuredBaseline(
        benchmark="bfcl",
        model="smollm2-135m",
        score=score,
        n=limit or 400,
        limit=limit,
        measured_at=datetime(2026, 12, 2, 3, 0, tzinfo=UTC),
        machine="testhost (x86_64, 2 CPUs)",
    )


def test_a_new_measurement_replaces_the_same_kind_and_keeps_the_others(tmp_path: Path) -> None:
    record_measured(_measured(0.10), tmp_path)
    record_measured(_measured(0.30, limit=4), tmp_path)
    record_measured(_measured(0.12), tmp_path)
    assert sorted((m.score, m.limit) for m in load_measured(tmp_path)) == [(0.12, None), (0.3, 4)]
    # Only a whole-test-set measurement may stand in for a score on every question.
    (entry,) = measured_entries(tmp_path)
    assert (
        entry.score == 0.12 and "testhost" in entry.provenance and "2026-12-02" in entry.provenance
    )


def test_the_leaderboard_prefers_a_measurement_of_the_exact_model(tmp_path: Path) -> None:
    record_measured(_measured(0.12), tmp_path)
    refs = ReferenceScores([], measured=measured_entries(tmp_path))
    base = refs.base("bfcl", "smollm2-135m")
    assert base is not None and base.score == 0.12 and base.source.startswith("ptb baseline")


def test_a_corrupt_file_is_one_clear_error(tmp_path: Path) -> None:
    measured_path(tmp_path).parent.mkdir(parents=True)
    measured_path(tmp_path).write_text("{not json")
    with pytest.raises(PtbError, match="not a valid list of measured baselines"):
        load_measured(tmp_path)


def test_list_baselines_shows_them_with_machine_and_date(tmp_path: Path) -> None:
    record_measured(_measured(0.30, limit=4), tmp_path)
    listed = run_ptb(
        "list", "baselines", "-b", "bfcl", "--json", env={"PTB_CACHE_DIR": str(tmp_path)}
    )
    assert listed.returncode == 0, listed.stderr
    (mine,) = [e for e in json.loads(listed.stdout) if "ptb baseline" in e["provenance"]]
    assert mine["score"] == 0.3 and "first 4 questions only" in mine["provenance"]
