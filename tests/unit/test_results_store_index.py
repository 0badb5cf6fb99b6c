"""The results store's journal: a re-export with nothing new reads no result and no record,
a changed trial is still exported again, a damaged journal or pack costs a re-export
rather than a wrong answer, and a store of the previous layout (run directories, an
older exporter's index) is read and carried into the journal once."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results import export as export_mod
from posttrainbench.host.results import store_index
from posttrainbench.host.results.export import export
from posttrainbench.host.results.export_progress import ExportProgress
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.results.store_index import JOURNAL_FILE, load_index, read_journal
from tests.results_fixtures import TrialSpec, unpack_to_run_dir, write_job


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
        raise AssertionError("record re-read although the journal vouched for it")

    monkeypatch.setattr(export_mod, "read_harbor_file", only_jobs)
    monkeypatch.setattr(store_index, "_from_record", refuse)


def _scores(results: Path) -> dict[str, float | None]:
    records, skipped = ResultsStore.open(results, create=False).load()
    assert skipped == []
    return {r.source_dir: r.score for r in records}


def test_export_again_reads_no_result_and_no_record(tmp_path: Path, monkeypatch) -> None:
    jobs, results, _ = _sweep(tmp_path)
    journal, lines = read_journal(results)
    assert len(journal) == lines == 3 and all(e.record is not None for e in journal.values())
    assert not (results / "runs").exists() or not any((results / "runs").iterdir())
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
    assert len(records) == 3
    assert {r.source_dir: r.flagged for r in records}[str(trials[1])] is True
    again = export([jobs], results)  # and the journal now holds the new fingerprint
    assert again.unchanged == 3 and not again.updated


@pytest.mark.parametrize("damage", ["missing", "garbage", "torn last line", "pack lost"])
def test_a_damaged_journal_or_pack_costs_a_re_export_never_a_wrong_answer(
    tmp_path: Path, damage: str
) -> None:
    jobs, results, _ = _sweep(tmp_path)
    before = _scores(results)
    journal = results / JOURNAL_FILE
    if damage == "missing":
        journal.unlink()
    elif damage == "garbage":
        journal.write_bytes(b"\x00{not json\n" + json.dumps({"run_id": 1}).encode() + b"\n")
    elif damage == "torn last line":
        journal.write_bytes(journal.read_bytes()[:-20])  # a crash mid-line
    else:
        for pack in (results / "packs").iterdir():
            pack.unlink()
    summary = export([jobs], results)
    lost = {"missing": 3, "garbage": 3, "torn last line": 1, "pack lost": 3}[damage]
    assert len(summary.added) == lost and summary.unchanged == 3 - lost, summary
    assert _scores(results) == before


def test_a_store_of_the_previous_layout_is_read_and_carried_into_the_journal(
    tmp_path: Path, monkeypatch
) -> None:
    jobs, results, _ = _sweep(tmp_path)
    before = _scores(results)
    for run_id in list(read_journal(results)[0]):
        unpack_to_run_dir(results, run_id)
    (results / JOURNAL_FILE).unlink()
    shutil.rmtree(results / "packs")
    assert _scores(results) == before  # run directories only, as exporters stored them
    assert load_index(results, results / "runs").reread == 3
    summary = export([jobs], results)  # their records are read once, not the trials
    assert summary.unchanged == 3 and not summary.added
    journal, _ = read_journal(results)
    assert all(e.record_stat is not None for e in journal.values())
    _no_reading(monkeypatch)
    assert export([jobs], results).unchanged == 3


def test_a_run_dir_replaced_behind_the_journal_is_not_trusted(tmp_path: Path) -> None:
    """A run dir swapped in by another writer (an older exporter, a restore from backup)
    has a record the journal never saw: it is re-read, and its stale fingerprint makes the
    trial export again, into a pack (the run dir goes)."""
    jobs, results, _ = _sweep(tmp_path)
    run_id = sorted(read_journal(results)[0])[0]
    run = unpack_to_run_dir(results, run_id)
    export([jobs], results)  # the journal now names the run dir, with its record's stat
    source = json.loads((run / "record.json").read_text())["source_dir"]
    backup = tmp_path / "backup"
    shutil.copytree(run, backup)
    raw = json.loads((backup / "record.json").read_text())
    raw["fingerprint"] = "0" * 16  # what an older export of the trial would have stored
    (backup / "record.json").write_text(json.dumps(raw))
    shutil.rmtree(run)
    shutil.move(backup, run)
    summary = export([jobs], results)
    assert summary.updated == [source] and summary.unchanged == 2
    assert not run.exists() and read_journal(results)[0][run_id].record is not None


def test_a_run_dir_a_packed_run_replaced_is_never_read_and_then_removed(tmp_path: Path) -> None:
    """A crash between the journal line of a packed replacement and the removal of the old
    run dir: the journal wins, and the next export removes the dir."""
    jobs, results, _ = _sweep(tmp_path)
    run_id = sorted(read_journal(results)[0])[0]
    lines = (results / JOURNAL_FILE).read_bytes()
    run = unpack_to_run_dir(results, run_id)
    (results / JOURNAL_FILE).write_bytes(lines)  # the packed line is back: the dir is stale
    raw = json.loads((run / "record.json").read_text())
    (run / "record.json").write_text(json.dumps({**raw, "score": 99.0}))
    assert 99.0 not in _scores(results).values()
    assert export([jobs], results).unchanged == 3
    assert not run.exists()


def test_a_journal_of_replaced_runs_is_rewritten(tmp_path: Path, monkeypatch) -> None:
    jobs, results, trials = _sweep(tmp_path)
    monkeypatch.setattr(export_mod, "_SLACK_LINES", 0)
    for i in range(2):
        (trials[0] / "verifier" / "metrics.json").touch()  # a new mtime: exported again
        (trials[0] / "verifier" / "metrics.json").write_text(
            (trials[0] / "verifier" / "metrics.json").read_text() + " " * (i + 1)
        )
        assert len(export([jobs], results).updated) == 1
    journal, lines = read_journal(results)
    assert len(journal) == 3 and lines <= 6


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
