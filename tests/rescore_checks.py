"""`ptb rescore` on a real exported trial, with a deliberately changed scorer.

Called by the e2e test that runs a real oracle trial (tests/integration/test_run_e2e.py),
so the re-score reuses that trial instead of running its own agent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from posttrainbench.host.payload import package_root
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.store import ResultsStore
from tests.helpers import run_ptb
from tests.results_fixtures import forget_run

_SCORE = "    def score(self, sample: Sample, completion: str) -> ScoreResult:\n"


def fixture_scorer_package(dest: Path) -> Path:
    """A copy of the package whose BFCL scorer calls every answer correct: a new evaluator
    version, put first on PYTHONPATH so the compiled task ships it."""
    package = dest / "posttrainbench"
    shutil.copytree(package_root(), package, ignore=shutil.ignore_patterns("__pycache__"))
    scorer = package / "task" / "benchmarks" / "bfcl" / "benchmark.py"
    text = scorer.read_text()
    assert _SCORE in text, "the BFCL scorer's signature changed: update this fixture"
    scorer.write_text(
        text.replace(_SCORE, _SCORE + '        return ScoreResult(1.0, None, "fixture scorer")\n')
    )
    return dest


def _rescore(tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    result = run_ptb(
        "rescore",
        str(tmp_path / "results"),
        "--runs-dir",
        str(tmp_path / "rescore"),
        "--json",
        timeout=1800,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout)


def _records(results: Path) -> list[ResultRecord]:
    records, skipped = ResultsStore.open(results, create=False).load()
    assert not skipped, skipped
    return records


def _trials(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "rescore" / "jobs").glob("rescore-*/*/result.json"))


def check_rescore(tmp_path: Path, original: ResultRecord) -> None:
    """Same code: nothing to do. Fixture scorer: one real re-score trial, the old score kept,
    the leaderboard on the new version; interrupted and run again: nothing scored twice."""
    (item,) = _rescore(tmp_path)["items"]
    assert item["status"] == "already_current" and not _trials(tmp_path), item

    env = {"PYTHONPATH": str(fixture_scorer_package(tmp_path / "fixture"))}
    (item,) = _rescore(tmp_path, env)["items"]
    assert item["status"] == "rescored", item
    assert item["old_version"] == original.task_version != item["new_version"]
    # Which of the task's inputs changed: the BFCL scorer, and nothing else (issue 38 item 2).
    assert item["changed"] == ["lib/posttrainbench/task/benchmarks/bfcl"], item
    assert (item["old_score"], item["new_score"]) == (original.score, 1.0), item
    (trial,) = _trials(tmp_path)
    records = {r.id: r for r in _records(tmp_path / "results")}
    assert records[original.id] == original  # the old score stays, untouched
    new = records[item["new_id"]]
    assert (new.rescore_of, new.task_version, new.score) == (
        original.id,
        item["new_version"],
        1.0,
    )
    # The original agent's run, scored again: its identity and cost, the new verdicts.
    assert (new.agent, new.time, new.usage) == (original.agent, original.time, original.usage)
    assert len(new.verdicts) == 5 and new.final_model_dir is None

    # Interrupted after the trial, before its export: the finished trial is exported, not re-run.
    forget_run(tmp_path / "results", new.id)
    (item,) = _rescore(tmp_path, env)["items"]
    assert (
        item["status"] == "rescored" and item["new_id"] == new.id and _trials(tmp_path) == [trial]
    )
    (item,) = _rescore(tmp_path, env)["items"]
    assert item["status"] == "already_rescored" and _trials(tmp_path) == [trial]

    collected = run_ptb("results", "collect", str(tmp_path / "results"), "--json")
    assert collected.returncode == 0, collected.stderr
    board = json.loads(collected.stdout)
    (cell,) = board["cells"]
    assert cell["score"] == 1.0 and cell["task_version"] == item["new_version"], cell
    assert "2 task versions" in cell["version_note"] and cell["selected"] == [new.id]
    rows = {r["id"]: r for r in board["runs"]}
    assert rows[new.id]["rescore_of"] == original.id and rows[new.id]["attempt"] == 1
    assert rows[original.id]["task_version"] == original.task_version
