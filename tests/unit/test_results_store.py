"""The results store's database: a re-export with nothing new reads no trial, a changed
trial is exported again, a damaged or foreign database is one clear error that changes
nothing, and the queries docs/results-store.md shows return what they say."""

from __future__ import annotations

import io
import re
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest

from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results import export as export_mod
from posttrainbench.host.results.export import export
from posttrainbench.host.results.export_progress import ExportProgress
from posttrainbench.host.results.store import ResultsStore, StoreError
from tests.helpers import run_ptb
from tests.results_fixtures import TrialSpec, sql, write_job

DOC = Path(__file__).resolve().parents[2] / "docs" / "results-store.md"
README = DOC.parents[1] / "README.md"


def _sweep(tmp_path: Path, n: int = 3) -> tuple[Path, Path, list[Path]]:
    job = write_job(tmp_path / "jobs", "job-a", [TrialSpec(score=i / 10) for i in range(n)])
    trials = sorted(p for p in job.iterdir() if (p / "trial.log").exists())
    results = tmp_path / "res"
    assert len(export([tmp_path / "jobs"], results).added) == n
    return tmp_path / "jobs", results, trials


def test_export_again_reads_no_result_and_no_record(tmp_path: Path, monkeypatch) -> None:
    """The `runs` table's source dirs and fingerprints vouch for every trial: neither a
    trial's result.json (a job's own is still read: it tells a job from a trial) nor a
    stored record is read."""
    jobs, results, _ = _sweep(tmp_path)
    assert sorted(p.name for p in results.iterdir()) == [".lock", "results.sqlite", "runs"]
    read = export_mod.read_harbor_file

    def only_jobs(root, name):
        assert not (root.path / "trial.log").exists(), f"read {root.path / name}"
        return read(root, name)

    def refuse(*args, **kwargs):
        raise AssertionError("a record was read although its fingerprint vouched for it")

    monkeypatch.setattr(export_mod, "read_harbor_file", only_jobs)
    monkeypatch.setattr(ResultsStore, "load", refuse)
    monkeypatch.setattr(ResultsStore, "record", refuse)
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
    # The replaced run's verdict rows are the new ones, not added to the old.
    rows = sql(
        results,
        "SELECT v.flagged, v.justification FROM verdicts v JOIN runs r USING (run_id) "
        "WHERE r.source_dir = ? AND v.judge = 'contamination'",
        str(trials[1]),
    )
    assert rows == [(1, "found it")]
    again = export([jobs], results)  # and the store now holds the new fingerprint
    assert again.unchanged == 3 and not again.updated


def test_an_interrupted_chunk_leaves_no_row_of_it(tmp_path: Path, monkeypatch) -> None:
    """A chunk is one transaction: interrupted half-way through its inserts, none of its
    runs, verdicts or files is in the store."""
    from posttrainbench.host.results import store_db

    job = write_job(tmp_path / "jobs", "j", [TrialSpec(score=0.1)])
    real_insert = store_db.insert_runs

    def killed(conn, runs):
        real_insert(conn, runs)
        raise KeyboardInterrupt

    monkeypatch.setattr(store_db, "insert_runs", killed)
    with pytest.raises(KeyboardInterrupt):
        export([job], tmp_path / "res")
    for table in ("runs", "verdicts", "files"):
        assert sql(tmp_path / "res", f"SELECT count(*) FROM {table}") == [(0,)], table


def test_a_damaged_or_foreign_database_is_one_clear_error_and_is_kept(tmp_path: Path) -> None:
    """Exit 2 with one `error:` line, for export and collect alike; the file is untouched."""
    cases = {
        "garbage": b"this is not a database at all" * 100,
        "foreign": None,  # a valid SQLite database of someone else's
    }
    for name, content in cases.items():
        store = tmp_path / name
        store.mkdir()
        db = store / "results.sqlite"
        if content is None:
            conn = sqlite3.connect(db)
            conn.execute("CREATE TABLE notes (text TEXT)")
            conn.commit()
            conn.close()
        else:
            db.write_bytes(content)
        before = db.read_bytes()
        write_job(tmp_path / "jobs", "j", [TrialSpec()])
        for args in (
            ("results", "collect", str(store)),
            ("results", "export", str(tmp_path / "jobs"), "-o", str(store)),
        ):
            result = run_ptb(*args)
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert result.returncode == 2, (name, args, result.stderr)
            assert len(lines) == 1 and lines[0].startswith("error:"), (name, result.stderr)
            assert "not a PostTrainBench results database" in lines[0], lines
        assert db.read_bytes() == before
        with pytest.raises(StoreError):
            ResultsStore.open(store, create=True)


def test_a_concurrent_writer_is_refused_while_readers_go_on(tmp_path: Path) -> None:
    jobs, results, _ = _sweep(tmp_path)
    store = ResultsStore.open(results, create=False)
    with store.locked():
        with pytest.raises(StoreError, match="another export"):
            export([jobs], results)
        assert len(ResultsStore.open(results, create=False).load()[0]) == 3


def _doc_queries() -> dict[str, str]:
    """The doc's example queries, by the heading above each: ```sql blocks."""
    text = DOC.read_text(encoding="utf-8")
    found = {}
    for heading, query in re.findall(r"#### (.+?)\n.*?```sql\n(.*?)```", text, re.S):
        found[heading.strip()] = query.strip()
    return found


def test_the_documented_queries_answer_what_they_say(tmp_path: Path) -> None:
    """docs/results-store.md's queries, run on an exported store, give the numbers the
    records hold (with `sqlite3`; with pandas too, as the doc shows, where it is installed:
    it is no dependency of this project)."""
    write_job(
        tmp_path / "jobs",
        "sweep",
        [
            TrialSpec(score=0.6),
            TrialSpec(score=0.8),
            TrialSpec(score=0.3, flagged=("contamination",)),
            TrialSpec(agent="codex", agent_model="openai/gpt-5", score=0.4),
            TrialSpec(benchmark="bfcl", score=None, error="AgentTimeoutError"),
        ],
    )
    export([tmp_path / "jobs"], tmp_path / "res")
    queries = _doc_queries()
    assert len(queries) >= 3, queries.keys()
    conn = sqlite3.connect(f"file:{tmp_path / 'res' / 'results.sqlite'}?mode=ro", uri=True)
    try:
        mean_query = queries["Mean score per benchmark, base model and agent"]
        rows = {(r[0], r[2]): (r[3], r[4]) for r in conn.execute(mean_query)}
        try:
            import pandas as pd
        except ImportError:
            pass
        else:
            frame = pd.read_sql_query(mean_query, conn)
            assert {
                (r.benchmark, r.agent_label): (r.runs, r.mean_score) for r in frame.itertuples()
            } == rows
        assert rows[("gsm8k", "claude-code:anthropic/claude-opus-4-1")] == (2, pytest.approx(0.7))
        assert rows[("gsm8k", "codex:openai/gpt-5")] == (1, pytest.approx(0.4))
        assert ("bfcl", "claude-code:anthropic/claude-opus-4-1") not in rows  # no score
        flagged = conn.execute(queries["Runs a judge flagged, and why"]).fetchall()
        assert [(row[2], row[3]) for row in flagged] == [("contamination", "detector")], flagged
        outcomes = {(r[0], r[1]): r[2] for r in conn.execute(queries["Outcomes per agent"])}
        assert outcomes[("claude-code:anthropic/claude-opus-4-1", "agent_error")] == 1
        assert outcomes[("claude-code:anthropic/claude-opus-4-1", "completed")] == 3
        (run_id,) = conn.execute("SELECT run_id FROM runs WHERE score = 0.4").fetchone()
        traces = conn.execute(queries["A run's trace, as text"], {"run_id": run_id}).fetchall()
        assert len(traces) == 1 and traces[0][0].startswith('{"type"'), traces
    finally:
        conn.close()


def test_the_readme_s_sqlite3_line_runs_on_a_store(tmp_path: Path) -> None:
    """The README's query, with the sqlite3 shell (scripts/setup.sh installs it)."""
    (line,) = [line for line in README.read_text().splitlines() if line.startswith("sqlite3 ")]
    write_job(tmp_path / "jobs", "sweep", [TrialSpec(score=0.6), TrialSpec(score=0.8)])
    export([tmp_path / "jobs"], tmp_path / "res")
    argv = [
        str(tmp_path / "res" / "results.sqlite") if a == "results/results.sqlite" else a
        for a in shlex.split(line)
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["gsm8k|claude-code:anthropic/claude-opus-4-1|2|0.7"]


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
