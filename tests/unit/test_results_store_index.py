"""The results store's index: a re-export with nothing new reads no result and no record,
a changed trial is still exported again, and a missing, corrupted or stale index is
rebuilt from the records rather than trusted."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from posttrainbench.integrity.judges.verdict import Judgement
from posttrainbench.results import export as export_mod
from posttrainbench.results import store_index
from posttrainbench.results.export import export
from posttrainbench.results.export_progress import ExportProgress
from posttrainbench.results.store import ResultsStore
from posttrainbench.results.store_index import INDEX_FILE, StoreIndex
from tests.results_fixtures import TrialSpec, write_job


def _sweep(tmp_path: Path, n: int = 3) -> tuple[Path, Path, list[Path]]:
    job = write_job(tmp_path / "jobs", "job-a", [TrialSpec(score=i / 10) for i in range(n)])
    trials = sorted(p for p in job.iterdir() if (p / "trial.log").exists())
    results = tmp_path / "res"
    assert len(export([tmp_path / "jobs"], results).added) == n
    return tmp_path / "jobs", results, trials


def _no_reading(monkeypatch) -> None:
    """Fail the test if the re-export opens a trial's result.json or re-reads any record
    (a job directory's own result.json is still read: it tells a job from a trial)."""
    read = export_mod.read_harbor_file

    def only_jobs(root, name):
        assert not (root.path / "trial.log").exists(), f"read {root.path / name}"
        return read(root, name)

    def refuse(*args, **kwargs):
        raise AssertionError("record re-read although the index vouched for it")

    monkeypatch.setattr(export_mod, "read_harbor_file", only_jobs)
    monkeypatch.setattr(store_index, "_from_record", refuse)


def test_export_again_reads_no_result_and_no_record(tmp_path: Path, monkeypatch) -> None:
    jobs, results, _ = _sweep(tmp_path)
    index = StoreIndex.model_validate_json((results / INDEX_FILE).read_text())
    assert len(index.runs) == 3
    _no_reading(monkeypatch)
    summary = export([jobs], results)
    assert summary.unchanged == 3 and not summary.added and not summary.updated


def test_a_changed_verdict_is_exported_again(tmp_path: Path) -> None:
    jobs, results, trials = _sweep(tmp_path)
    verdict_file = trials[1] / "verifier" / "judgement_contamination.json"
    verdict = Judgement.model_validate_json(verdict_file.read_text())
    verdict_file.write_text(
        verdict.model_copy(update={"flagged": True, "justification": "found it"}).model_dump_json()
    )
    summary = export([jobs], results)
    assert summary.updated == [str(trials[1])] and summary.unchanged == 2
    records, _ = ResultsStore.open(results, create=False).load()
    assert {r.source_dir: r.flagged for r in records}[str(trials[1])] is True
    again = export([jobs], results)  # and the index now holds the new fingerprint
    assert again.unchanged == 3 and not again.updated


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong shape"])
def test_a_missing_or_corrupted_index_is_rebuilt_from_the_records(
    tmp_path: Path, damage: str
) -> None:
    jobs, results, _ = _sweep(tmp_path)
    index = results / INDEX_FILE
    if damage == "missing":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"\x00{not json")
    else:
        index.write_text(json.dumps({"format": "posttrainbench-results-index", "runs": [1]}))
    summary = export([jobs], results)
    assert summary.unchanged == 3 and not summary.added and not summary.updated
    assert len(StoreIndex.model_validate_json(index.read_text()).runs) == 3


def test_a_run_replaced_behind_the_index_is_not_trusted(tmp_path: Path) -> None:
    """A run dir swapped in by another writer (an older exporter, a restore from backup)
    has a record the index never saw: it is re-read, and its stale fingerprint makes the
    trial export again."""
    jobs, results, trials = _sweep(tmp_path)
    records, _ = ResultsStore.open(results, create=False).load()
    run = results / "runs" / records[0].id
    backup = tmp_path / "backup"
    shutil.copytree(run, backup)
    raw = json.loads((backup / "record.json").read_text())
    raw["fingerprint"] = "0" * 16  # what an older export of the trial would have stored
    (backup / "record.json").write_text(json.dumps(raw))
    shutil.rmtree(run)
    shutil.move(backup, run)
    summary = export([jobs], results)
    assert summary.updated == [records[0].source_dir] and summary.unchanged == 2


def test_progress_is_one_line_on_a_terminal_and_plain_lines_in_a_log() -> None:
    ticks = iter(float(i) for i in range(100))
    screen = io.StringIO()
    bar = ExportProgress(screen, tty=True, clock=lambda: next(ticks))
    bar(1, 10, False)
    bar(10, 10, True)
    bar.close()
    assert "\n" not in screen.getvalue() and "\rexporting trials: 10 of 10" in screen.getvalue()
    ticks = iter(float(i) * 20 for i in range(100))
    log = io.StringIO()
    bar = ExportProgress(log, tty=False, clock=lambda: next(ticks))
    bar(1, 10, False)
    bar(10, 10, True)
    bar.close()
    assert log.getvalue().splitlines() == [
        "exporting trials: 1 of 10+ found so far (20 s)",
        "exporting trials: 10 of 10 (40 s)",
    ]
