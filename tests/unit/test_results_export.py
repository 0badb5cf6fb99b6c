"""`ptb results export`: Harbor trial dirs into the results store, incrementally and safely."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results import export as export_mod
from posttrainbench.host.results import harbor_trial
from posttrainbench.host.results.export import export, find_trials
from posttrainbench.host.results.store import ResultsStore, StoreError
from tests.results_fixtures import T0, TrialSpec, stored_file, write_job, write_trial


def _records(results: Path):
    records, skipped = ResultsStore.open(results, create=False).load()
    return {r.trial_name: r for r in records}, skipped


def test_export_writes_one_record_per_trial_with_everything(tmp_path: Path) -> None:
    job = write_job(
        tmp_path / "jobs",
        "job-a",
        [
            TrialSpec(
                trial_id="00000000-0000-0000-0000-000000000001",
                score=0.61,
                agent_hours=3.0,
                hours=10,
                gpus=2,
                flagged=("api_usage",),
                final_model=True,
            ),
        ],
    )
    summary = export([tmp_path / "jobs"], tmp_path / "res")
    assert len(summary.added) == 1 and not summary.skipped
    (record,) = _records(tmp_path / "res")[0].values()
    assert record.id == "00000000-0000-0000-0000-000000000001"
    assert (record.job_name, record.agent, record.agent_model) == (
        "job-a",
        "claude-code",
        "anthropic/claude-opus-4-1",
    )
    assert (record.benchmark, record.base_model, record.hours) == ("gsm8k", "qwen3-1.7b", 10)
    assert (
        record.status == "completed"
        and record.score == 0.61
        and record.metrics.base_model.accuracy == 0.2
    )
    assert record.flagged is True and [v.judge for v in record.flagging_judges] == ["api_usage"]
    assert len(record.verdicts) == 5
    assert (
        record.usage.cost_usd == 3.5
        and record.usage.input_tokens == 120_000
        and record.usage.source == "harbor"
    )
    assert record.usage.gpu_hours == pytest.approx(6.0)
    assert record.time.agent_hours == pytest.approx(3.0) and record.time.fraction == pytest.approx(
        0.3
    )
    assert (
        stored_file(tmp_path / "res", record, record.trace_files[0])
        == (job / record.trial_name / "agent" / "claude-code.txt").read_bytes()
    )
    assert record.snapshot_dir == "snapshot"
    assert stored_file(tmp_path / "res", record, "snapshot/train.py")
    # stored as rows: no run directory at all
    assert record.final_model_dir is None and not (tmp_path / "res" / "runs" / record.id).exists()


def test_final_model_only_when_asked(tmp_path: Path) -> None:
    write_job(tmp_path / "jobs", "j", [TrialSpec(final_model=True)])
    export([tmp_path / "jobs"], tmp_path / "res", with_final_model=True)
    (record,) = _records(tmp_path / "res")[0].values()
    assert record.final_model_dir == "final_model"
    assert (tmp_path / "res" / "runs" / record.id / "final_model" / "config.json").is_file()


def test_unscored_trials_are_kept_with_their_outcome_and_reason(tmp_path: Path) -> None:
    write_job(
        tmp_path / "jobs",
        "j",
        [
            TrialSpec(error="AgentTimeoutError", score=None),
            TrialSpec(verifier_error="final model not found at /logs/artifacts/final_model"),
        ],
    )
    export([tmp_path / "jobs"], tmp_path / "res")
    records = sorted(_records(tmp_path / "res")[0].values(), key=lambda r: r.status)
    assert [r.status for r in records] == ["agent_error", "no_model"]
    assert records[0].error.startswith("AgentTimeoutError: AgentTimeoutError happened")
    assert records[1].error == "final model not found at /logs/artifacts/final_model"
    assert records[1].metrics.failure == "no_model" and records[1].reward == 0.0
    assert all(r.score is None for r in records)


def test_export_again_adds_only_new_trials_and_refreshes_changed_verdicts(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "j", [TrialSpec(), TrialSpec()])
    first = export([jobs], tmp_path / "res")
    assert len(first.added) == 2
    again = export([jobs], tmp_path / "res")
    assert (again.added, again.updated, again.unchanged) == ([], [], 2)
    new_trial = write_trial(job, TrialSpec(started=T0 + timedelta(hours=12)))
    third = export([jobs], tmp_path / "res")
    assert third.added == [str(new_trial)] and third.unchanged == 2
    # `ptb judge` later writes a newer verdict into judges/: it wins, and the run is refreshed.
    Judgement(
        judge="contamination",
        flagged=True,
        decided_by="override",
        justification="manual override: copied test items",
    ).write(new_trial / "judges")
    fourth = export([jobs], tmp_path / "res")
    assert fourth.updated == [str(new_trial)]
    record = _records(tmp_path / "res")[0][new_trial.name]
    assert record.flagged is True and record.flagging_judges[0].decided_by == "override"


def test_a_verdict_rewritten_while_its_trial_is_read_is_read_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ptb judge` may rewrite a verdict while an export reads that trial: the stored
    # fingerprint must be the one from before the read, so the next export sees the change.
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "j", [TrialSpec()])
    trial = next(p for p in job.iterdir() if p.is_dir())
    verdicts = harbor_trial._verdicts

    def read_then_judge(*args):
        found = verdicts(*args)
        Judgement(
            judge="contamination",
            flagged=True,
            decided_by="override",
            justification="judged again during the export",
        ).write(trial / "judges")
        return found

    monkeypatch.setattr(harbor_trial, "_verdicts", read_then_judge)
    assert len(export([jobs], tmp_path / "res").added) == 1
    assert _records(tmp_path / "res")[0][trial.name].flagged is False
    monkeypatch.undo()
    again = export([jobs], tmp_path / "res")
    assert again.updated == [str(trial)]
    assert _records(tmp_path / "res")[0][trial.name].flagged is True


def test_running_and_malformed_trials_are_reported_not_fatal(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "j", [TrialSpec(), TrialSpec(finished=False)])
    broken = write_trial(job, TrialSpec())
    text = (broken / "result.json").read_text()
    (broken / "result.json").write_text(text[: len(text) // 2])  # half-written
    stub = write_trial(job, TrialSpec())
    (stub / "result.json").write_text('{"id": ')  # cut before it says it is a trial
    bad_metrics = write_trial(job, TrialSpec())
    (bad_metrics / "verifier" / "metrics.json").write_text('{"accuracy": "high"}')
    summary = export([jobs], tmp_path / "res")
    assert len(summary.added) == 1 and len(summary.in_progress) == 1
    assert len(summary.skipped) == 3
    assert any(str(broken) in line and "result.json" in line for line in summary.skipped)
    assert any(str(stub) in line and "half-written" in line for line in summary.skipped)
    assert any(str(bad_metrics) in line and "metrics.json" in line for line in summary.skipped)


def test_finds_trials_in_ptb_run_dirs_job_dirs_and_trial_dirs(tmp_path: Path) -> None:
    run = tmp_path / "ptb-runs" / "run-1"
    job = write_job(run / "jobs", "run-1", [TrialSpec(), TrialSpec()])
    (run / "tasks" / "t" / "tests").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    assert len(list(find_trials(tmp_path / "ptb-runs"))) == 2
    assert len(list(find_trials(job))) == 2
    trial = next(p for p in job.iterdir() if p.is_dir())
    assert [t.path for t in find_trials(trial)] == [str(trial)]
    # The same trial reached twice (a dir and its parent) is exported once, and so is a copy.
    import shutil

    shutil.copytree(trial, tmp_path / "copy" / trial.name)
    summary = export([job, trial, tmp_path / "copy"], tmp_path / "res")
    assert len(summary.added) == 2
    assert summary.skipped == [
        f"{tmp_path / 'copy' / trial.name}: the same trial (id {_records_id(trial)}) as {trial}"
    ]


def test_an_agent_check_is_left_out_not_exported_as_a_run(tmp_path: Path) -> None:
    """Issue 38 item 4: a `ptb agents check` run (a CLI against a scripted model) is not an
    agent run: in the same directory as real runs, the export leaves it out and says so."""
    runs = tmp_path / "ptb-runs"
    write_job(runs / "run-1" / "jobs", "run-1", [TrialSpec()])
    check = runs / "check-claude-code-1"
    write_job(check / "jobs", "check-claude-code-1", [TrialSpec()])
    (check / export_mod.AGENT_CHECK_MARKER).write_text("ptb agents check claude-code\n")
    summary = export([runs], tmp_path / "res")
    assert len(summary.added) == 1 and "check-claude-code" not in summary.added[0]
    assert summary.agent_checks == [str(check.resolve())]
    assert summary.skipped == []


def _records_id(trial: Path) -> str:
    return json.loads((trial / "result.json").read_text())["id"]


def test_many_trials_go_through_worker_processes(tmp_path: Path) -> None:
    """Workers read each trial's result.json themselves (the walk only sees trial.log): a
    copy of a trial is told apart once read, and a stored trial found at a new path is
    unchanged, both through the worker pool."""
    import shutil

    n = export_mod.POOL_THRESHOLD + 6
    jobs = tmp_path / "jobs"
    job = write_job(
        jobs,
        "big",
        [TrialSpec(started=T0 + timedelta(minutes=i), score=i / 100) for i in range(n)],
    )
    first, moved = sorted(p for p in job.iterdir() if p.is_dir())[:2]
    copy = jobs / "zz-backup" / first.name
    shutil.copytree(first, copy)
    summary = export([jobs], tmp_path / "res", workers=2)
    copy_line = f"{copy}: the same trial (id {_records_id(first)}) as {first}"
    assert len(summary.added) == n and summary.skipped == [copy_line]
    records = _records(tmp_path / "res")[0]
    assert sorted(r.score for r in records.values()) == [i / 100 for i in range(n)]
    (jobs / "moved").mkdir()
    moved.rename(jobs / "moved" / moved.name)
    again = export([jobs], tmp_path / "res", workers=2)
    assert again.unchanged == n and not again.added and not again.updated
    assert again.skipped == [copy_line]
    assert len(_records(tmp_path / "res")[0]) == n


def _fork_workers(monkeypatch) -> None:
    """Export workers forked, whatever threads this test process runs."""
    import multiprocessing

    monkeypatch.setattr(export_mod, "_pool_context", lambda: multiprocessing.get_context("fork"))


def test_spawned_workers_export_as_forked_ones_do(tmp_path: Path, monkeypatch) -> None:
    """Workers are spawned when the exporting process runs another thread: they get this
    export's setting through the initializer, not by inheriting it."""
    import multiprocessing

    n = export_mod.POOL_THRESHOLD + 6
    jobs = tmp_path / "jobs"
    write_job(jobs, "j", [TrialSpec(started=T0 + timedelta(minutes=i)) for i in range(n)])
    monkeypatch.setattr(export_mod, "_pool_context", lambda: multiprocessing.get_context("spawn"))
    summary = export([jobs], tmp_path / "res", workers=2)
    assert len(summary.added) == n and not summary.skipped
    assert len(_records(tmp_path / "res")[0]) == n


def test_a_chunk_whose_commit_fails_is_skipped_and_stores_nothing_of_it(
    tmp_path: Path, monkeypatch
) -> None:
    """The parent commits a chunk's runs in one transaction: when that write fails (a full
    disk), every run of the chunk is reported skipped, none of it is stored, and the next
    export adds them."""
    import sqlite3

    from posttrainbench.host.results import store_db

    n = export_mod.POOL_THRESHOLD + 6
    jobs = tmp_path / "jobs"
    write_job(jobs, "j", [TrialSpec(started=T0 + timedelta(minutes=i)) for i in range(n)])
    real_insert = store_db.insert_runs
    calls = {"n": 0}

    def second_write_fails(conn, runs):
        calls["n"] += 1
        if calls["n"] == 2:
            real_insert(conn, runs[:1])  # the disk fills half-way through the chunk
            raise sqlite3.OperationalError("database or disk is full")
        return real_insert(conn, runs)

    monkeypatch.setattr(store_db, "insert_runs", second_write_fails)
    summary = export([jobs], tmp_path / "res", workers=2)
    failed = [line for line in summary.skipped if "database or disk is full" in line]
    lost = export_mod._CHUNK
    assert len(failed) == lost and len(summary.added) == n - lost
    assert len(_records(tmp_path / "res")[0]) == n - lost
    monkeypatch.undo()
    again = export([jobs], tmp_path / "res", workers=2)
    assert len(again.added) == lost and again.unchanged == n - lost
    assert len(_records(tmp_path / "res")[0]) == n


def test_a_worker_killed_mid_export_is_an_error_and_the_next_export_completes(
    tmp_path: Path, monkeypatch
) -> None:
    """A worker killed (the OOM killer, say) ends the export with an error, not a hang;
    what was committed stays, and the next export stores the rest."""
    n = export_mod.POOL_THRESHOLD + 6
    jobs = tmp_path / "jobs"
    write_job(jobs, "j", [TrialSpec(started=T0 + timedelta(minutes=i)) for i in range(n)])
    real_prepare = export_mod._prepare
    victim = sorted(p for p in (jobs / "j").iterdir() if p.is_dir())[40]

    def killed_at_the_victim(job):
        if job.trial_dir == str(victim.resolve()):
            os._exit(9)
        return real_prepare(job)

    monkeypatch.setattr(export_mod, "_prepare", killed_at_the_victim)
    _fork_workers(monkeypatch)  # they inherit the patch (spawned ones, when a thread runs, not)
    with pytest.raises(export_mod.WorkerDied, match="ended without answering"):
        export([jobs], tmp_path / "res", workers=2)
    kept = len(_records(tmp_path / "res")[0])
    assert kept < n
    monkeypatch.undo()
    again = export([jobs], tmp_path / "res", workers=2)
    assert len(again.added) == n - kept and again.unchanged == kept
    assert len(_records(tmp_path / "res")[0]) == n


def test_interrupted_export_loses_nothing_and_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "j", [TrialSpec(started=T0 + timedelta(hours=i)) for i in range(5)])
    original = export_mod.stage_run_files
    calls = {"n": 0}

    def crash_on_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            original(*args, **kwargs)
            raise KeyboardInterrupt  # killed after its files were packed, before its record
        return original(*args, **kwargs)

    monkeypatch.setattr(export_mod, "stage_run_files", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        export([jobs], tmp_path / "res")
    records, skipped = _records(tmp_path / "res")
    assert len(records) == 2 and not skipped
    monkeypatch.setattr(export_mod, "stage_run_files", original)
    summary = export([jobs], tmp_path / "res")
    assert len(summary.added) == 3 and summary.unchanged == 2
    assert len(_records(tmp_path / "res")[0]) == 5
    assert not (tmp_path / "res" / ".staging").exists()


def test_a_replacement_interrupted_mid_swap_is_restored(tmp_path: Path) -> None:
    write_job(tmp_path / "jobs", "j", [TrialSpec(final_model=True)])
    export([tmp_path / "jobs"], tmp_path / "res", with_final_model=True)  # a run directory
    store = ResultsStore(tmp_path / "res")
    (run_dir,) = list(store.runs.iterdir())
    # Killed between moving the old run aside and moving the new one in.
    store.attic.mkdir()
    os.replace(run_dir, store.attic / run_dir.name)
    assert not run_dir.exists()  # its row stays: only the model's directory was aside
    with store.locked():
        pass
    assert len(_records(tmp_path / "res")[0]) == 1
    assert (run_dir / "final_model" / "config.json").is_file()


def test_store_refuses_foreign_directories_and_concurrent_writers(tmp_path: Path) -> None:
    write_job(tmp_path / "jobs", "j", [TrialSpec()])
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(StoreError, match="not an empty directory"):
        export([tmp_path / "jobs"], other)
    assert (other / "keep.txt").read_text() == "mine" and len(list(other.iterdir())) == 1
    store = ResultsStore.open(tmp_path / "res", create=True)
    with store.locked():
        with pytest.raises(StoreError, match="another export"):
            export([tmp_path / "jobs"], tmp_path / "res")


def test_trial_without_task_spec_uses_the_task_name(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "j", [TrialSpec(benchmark="humaneval", model="smollm3-3b")])
    trial = next(p for p in job.iterdir() if p.is_dir())
    (trial / "verifier" / "task.json").unlink()
    export([tmp_path / "jobs"], tmp_path / "res")
    (record,) = _records(tmp_path / "res")[0].values()
    assert (record.benchmark, record.base_model, record.hours) == ("humaneval", "smollm3-3b", None)


def test_usage_falls_back_to_the_trace(tmp_path: Path) -> None:
    job = write_job(
        tmp_path / "jobs", "j", [TrialSpec(cost_usd=None, input_tokens=None, output_tokens=None)]
    )
    trial = next(p for p in job.iterdir() if p.is_dir())
    lines = [
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "total_cost_usd": 1.25,
                "usage": {"input_tokens": 1000, "output_tokens": 50},
            }
        )
    ]
    (trial / "agent" / "claude-code.txt").write_text("\n".join(lines) + "\n")
    export([tmp_path / "jobs"], tmp_path / "res")
    (record,) = _records(tmp_path / "res")[0].values()
    assert record.usage.source == "trace"
    assert (record.usage.cost_usd, record.usage.input_tokens, record.usage.output_tokens) == (
        1.25,
        1000,
        50,
    )


def test_records_stored_as_scored_or_errored_still_load_with_an_outcome_kind(
    tmp_path: Path,
) -> None:
    """Before the outcome kinds a record said only scored or errored, with the reason in
    `error`; the store reads those as the kinds they were."""
    from posttrainbench.host.results.record import ResultRecord

    write_job(tmp_path / "jobs", "j", [TrialSpec(score=0.5)])
    export([tmp_path / "jobs"], tmp_path / "res")
    (record,) = _records(tmp_path / "res")[0].values()
    stored = record.model_dump(mode="json")
    old = {k: v for k, v in stored.items() if k != "metrics"}
    cases = [
        ("scored", None, "completed"),
        ("errored", "verifier: final model not found at /logs/artifacts/final_model", "no_model"),
        ("errored", "verifier: judge not configured: no key", "verifier_error"),
        ("errored", "the verifier wrote no reward", "verifier_error"),
        ("errored", "EnvironmentStartTimeoutError: slow", "infra_error"),
        ("errored", "AgentTimeoutError: out of time", "agent_error"),
        ("errored", "SomethingElse: who knows", "agent_error"),
    ]
    for status, error, kind in cases:
        loaded = ResultRecord.model_validate_json(
            json.dumps({**old, "status": status, "error": error})
        )
        assert loaded.status == kind, (status, error)


def test_the_walk_takes_a_trial_id_from_harbors_result_without_a_full_parse(
    tmp_path: Path, monkeypatch
) -> None:
    """Written as Harbor writes it (its own model, indented): the leading pattern finds the
    id, so the parent never parses a whole result.json to tell a copy of a trial."""
    trial = write_trial(tmp_path / "job", TrialSpec())
    text = (trial / "result.json").read_text()
    monkeypatch.setattr(export_mod, "trial_id", lambda text: pytest.fail("parsed in full"))
    assert export_mod._run_id(text) == json.loads(text)["id"]
