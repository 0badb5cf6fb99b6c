"""A store written before the database (packs, journal, run dirs: tests/fixtures/
results_store_v2, made by that code) is migrated on its first open: every record and
file as that code read them, the old files kept in legacy/, nothing lost when the
migration is interrupted or a blob is damaged."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from posttrainbench.host.results import store_db, store_migrate
from posttrainbench.host.results.store import ResultsStore
from tests.helpers import run_ptb
from tests.results_fixtures import sql, stored_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "results_store_v2"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
PACKED, OLD_DIR, MODEL_DIR = (
    "aaaaaaaa-0000-4000-8000-000000000000",
    "bbbbbbbb-0000-4000-8000-000000000000",
    "dddddddd-0000-4000-8000-000000000000",
)


def _old_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(FIXTURE / "store", store)
    return store


def _check_all_runs(results: Path) -> None:
    records, skipped = ResultsStore.open(results, create=False).load()
    assert skipped == []
    assert {r.id: r.model_dump(mode="json") for r in records} == {
        run_id: expected["record"] for run_id, expected in EXPECTED.items()
    }
    for record in records:
        for name, digest in EXPECTED[record.id]["files"].items():
            data = stored_file(results, record, name)
            assert hashlib.sha256(data).hexdigest() == digest, (record.id, name)


def test_an_older_store_is_migrated_on_first_open(tmp_path: Path) -> None:
    results = _old_store(tmp_path)
    pack = next((results / "packs").iterdir()).read_bytes()
    _check_all_runs(results)
    assert sorted(p.name for p in results.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        ".lock",
        "legacy",
        "results.sqlite",
        "runs",
    ]
    legacy = results / "legacy"
    assert sorted(p.name for p in legacy.iterdir()) == ["journal.jsonl", "packs", "store.json"]
    assert next((legacy / "packs").iterdir()).read_bytes() == pack
    # Packed runs' files are rows now; run dirs stay where they were, model included.
    assert sql(results, "SELECT count(*) FROM files WHERE run_id = ?", PACKED) == [(2,)]
    assert sql(results, "SELECT count(*) FROM files WHERE run_id = ?", MODEL_DIR) == [(0,)]
    assert (results / "runs" / MODEL_DIR / "final_model" / "config.json").is_file()
    assert (results / "runs" / OLD_DIR / "trace-00-claude-code.txt").is_file()
    assert sql(results, "SELECT value FROM meta WHERE key = 'migrated_from'") == [("2",)]
    # Opened again: read as it is, nothing migrated twice.
    before = (results / "results.sqlite").read_bytes()
    _check_all_runs(results)
    assert (results / "results.sqlite").read_bytes() == before


def test_the_cli_reads_an_older_store_as_before(tmp_path: Path) -> None:
    results = _old_store(tmp_path)
    result = run_ptb("results", "collect", str(results), "--json")
    assert result.returncode == 0, result.stderr
    board = json.loads(result.stdout)
    assert sorted(r["id"] for r in board["runs"]) == sorted(EXPECTED)
    flagged = run_ptb("results", "flagged", str(results))
    assert flagged.returncode == 0 and "__aaaaaaa" in flagged.stdout, flagged.stdout
    assert "1 of 4 runs flagged" in flagged.stdout


def test_an_interrupted_migration_changes_nothing_and_runs_again(
    tmp_path: Path, monkeypatch
) -> None:
    results = _old_store(tmp_path)
    files = sorted(str(p.relative_to(results)) for p in results.rglob("*"))
    real_insert = store_db.insert_runs

    def killed(conn, runs):
        real_insert(conn, runs[:2])
        raise KeyboardInterrupt

    monkeypatch.setattr(store_db, "insert_runs", killed)
    with pytest.raises(KeyboardInterrupt):
        ResultsStore.open(results, create=False)
    assert not (results / "results.sqlite").exists()
    left = sorted(str(p.relative_to(results)) for p in results.rglob("*"))
    assert [f for f in left if f not in (".lock", "results.sqlite.new")] == files
    monkeypatch.undo()
    _check_all_runs(results)
    assert not (results / "results.sqlite.new").exists()


def test_a_migration_killed_after_its_commit_finishes_moving_on_the_next_open(
    tmp_path: Path, monkeypatch
) -> None:
    results = _old_store(tmp_path)

    def killed(root, stale=()):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_migrate, "finish_migration", killed)
    with pytest.raises(KeyboardInterrupt):
        ResultsStore.open(results, create=False)
    assert (results / "results.sqlite").is_file() and (results / "store.json").is_file()
    monkeypatch.undo()
    _check_all_runs(results)  # a reader needs no move: the database is the store
    store = ResultsStore.open(results, create=False)
    with store.locked():  # the next writer moves what is left
        pass
    assert not (results / "store.json").exists()
    assert (results / "legacy" / "store.json").is_file()


def test_runs_that_cannot_be_read_are_reported_and_kept(tmp_path: Path) -> None:
    """A damaged blob of a packed record and an invalid run-dir record: listed as skipped
    by every load, as the old store listed them; their bytes stay in legacy/ and runs/."""
    results = _old_store(tmp_path)
    line = next(
        json.loads(x) for x in (results / "journal.jsonl").read_text().splitlines() if PACKED in x
    )
    pack_name, offset, _, _ = line["record"]
    with open(results / "packs" / pack_name, "r+b") as pack:
        pack.seek(offset)
        first = pack.read(1)
        pack.seek(offset)
        pack.write(bytes([first[0] ^ 0xFF]))
    (results / "runs" / OLD_DIR / "record.json").write_text('{"id": "x"')
    records, skipped = ResultsStore.open(results, create=False).load()
    assert sorted(r.id for r in records) == sorted(set(EXPECTED) - {PACKED, OLD_DIR})
    assert len(skipped) == 2
    assert any(PACKED in s and "short or damaged" in s for s in skipped), skipped
    assert any(OLD_DIR in s and "not a valid run record" in s for s in skipped), skipped
    assert (results / "legacy" / "packs" / pack_name).is_file()
    assert (results / "runs" / OLD_DIR / "record.json").read_text() == '{"id": "x"'
    result = run_ptb("results", "collect", str(results))
    assert result.returncode == 0 and result.stderr.count("warning: skipped:") == 2
