"""Task versions: what changes one, how a cell uses mixed versions, which runs re-score."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from posttrainbench.core.errors import PtbError
from posttrainbench.core.verdict import Judgement, LlmVote
from posttrainbench.host.rescore.plan import plan
from posttrainbench.host.results.collect import collect
from posttrainbench.host.results.export import export
from posttrainbench.host.results.judge_agreement import judge_agreement
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.report.render import render_report
from posttrainbench.host.results.rescore_origin import RescoreOrigin
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.host.tasks.task_version import (
    TASK_VERSION_FILE,
    TaskVersion,
    changed_inputs,
    stamp,
    version_of,
)
from posttrainbench.task.schemas import TaskSpec
from tests.helpers import run_ptb
from tests.results_fixtures import T0, TrialSpec, write_job

CELL = ("claude-code:anthropic/claude-opus-4-1", "gsm8k", "qwen3-1.7b")


def test_version_follows_the_scorer_not_the_run_settings(tmp_path: Path) -> None:
    options = CompileOptions(hours=0.1, final_eval_limit=3)
    task = compile_task("bfcl", "smollm2-135m", tmp_path / "a", options)
    tests = task / "tests"
    stamped = TaskVersion.model_validate_json((tests / TASK_VERSION_FILE).read_text())
    spec = TaskSpec.load(tests / "task.json")
    assert stamped.version == version_of(tests, spec)
    # Hours, feedback, resources shape the agent's run, not the score.
    longer = compile_task(
        "bfcl",
        "smollm2-135m",
        tmp_path / "b",
        options.model_copy(update={"hours": 5.0, "feedback": "none", "cpus": 4}),
    )
    assert (
        TaskVersion.model_validate_json((longer / "tests" / TASK_VERSION_FILE).read_text()).version
        == stamped.version
    )
    # A scoring setting, the sealed data or one byte of the verifier's code: a new version.
    assert version_of(tests, spec.model_copy(update={"final_eval_limit": 4})) != stamped.version
    for changed in ("data/bfcl/test.jsonl", "lib/posttrainbench/task/benchmarks/bfcl/benchmark.py"):
        copy = tmp_path / f"copy-{changed.count('/')}"
        shutil.copytree(tests, copy)
        with (copy / changed).open("a") as f:
            f.write("\n")
        assert version_of(copy, spec) != stamped.version, changed


def test_a_version_is_a_pure_function_of_what_scores(tmp_path: Path) -> None:
    """Issue 38 item 2: two compiles in fresh dirs, and one from a copy of the checkout
    elsewhere, give the same version and the same input hashes; a changed file is named."""
    import subprocess
    import sys

    def stamped(task: Path) -> TaskVersion:
        return TaskVersion.model_validate_json((task / "tests" / TASK_VERSION_FILE).read_text())

    options = CompileOptions(hours=0.1)
    first = stamped(compile_task("bfcl", "smollm2-135m", tmp_path / "one", options))
    second = stamped(compile_task("bfcl", "smollm2-135m", tmp_path / "two", options))
    src = Path(__file__).resolve().parents[2] / "src"
    copy = tmp_path / "elsewhere" / "src"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    script = (
        "from pathlib import Path; from posttrainbench.host.tasks.compiler import compile_task;"
        "from posttrainbench.host.tasks.options import CompileOptions;"
        f"compile_task('bfcl', 'smollm2-135m', Path({str(tmp_path / 'three')!r}), "
        "CompileOptions(hours=0.1))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    third = stamped(tmp_path / "three" / "bfcl-smollm2-135m")
    assert first.version == second.version == third.version
    assert first.inputs == second.inputs == third.inputs and "settings" in first.inputs
    assert {"test.sh", "data/bfcl", "lib/posttrainbench/task/benchmarks/bfcl"} <= set(first.inputs)

    # What changed is named: one byte in the contamination judge's code.
    tests = tmp_path / "one" / "bfcl-smollm2-135m" / "tests"
    with (tests / "lib/posttrainbench/task/integrity/judges/contamination.py").open("a") as f:
        f.write("\n")
    spec = TaskSpec.load(tests / "task.json")
    again = stamp(tests, spec, "test")
    assert again.version != first.version
    assert changed_inputs(first.inputs, again.inputs) == ["lib/posttrainbench/task/integrity"]


def _records(tmp_path: Path, specs: list[TrialSpec]) -> list[ResultRecord]:
    write_job(tmp_path / "jobs", "job", specs)
    export([tmp_path / "jobs"], tmp_path / "res")
    records, skipped = ResultsStore.open(tmp_path / "res", create=False).load()
    assert not skipped
    return records


def _versioned(record: ResultRecord, version: str, hours: float) -> ResultRecord:
    return record.model_copy(
        update={"task_version": version, "task_compiled_at": T0 + timedelta(hours=hours)}
    )


def test_a_cell_uses_its_newest_version_and_says_what_it_left_out(tmp_path: Path) -> None:
    by_score = {
        r.score: r
        for r in _records(
            tmp_path,
            [
                TrialSpec(score=0.6, started=T0),
                TrialSpec(score=0.2, started=T0 + timedelta(hours=1)),
                TrialSpec(error="EnvironmentStartTimeoutError", score=None, started=T0),
            ],
        )
    }
    old = _versioned(by_score[0.6], "tv-0000000000000001", 0)
    other, errored = by_score[0.2], by_score[None]
    # A re-score of `old` by a newer scorer: the original agent's run, scored again.
    rescored = RescoreOrigin.of(old).apply(
        _versioned(other, "tv-0000000000000002", 5).model_copy(
            update={"id": "rescore-1", "score": 0.9}
        )
    )
    runs = [old, other, errored, rescored]  # `other` is unversioned (scored before versions)
    board = collect(runs, results_dir=tmp_path, policy="mean", weights={})
    cell = board.cell(*CELL)
    assert cell.score == 0.9 and cell.selected == ["rescore-1"]
    assert cell.task_version == "tv-0000000000000002" and cell.n_errored == 1
    assert "3 task versions" in cell.version_note and "2 run(s)" in cell.version_note
    # Cost and time are the agents' runs' own: the re-score adds none.
    assert cell.cost_usd == pytest.approx(3 * 3.5)
    rows = {r.id: r for r in board.runs}
    assert rows["rescore-1"].attempt == rows[old.id].attempt
    assert rows["rescore-1"].rescore_of == old.id
    # Asked to mix: every version counts, a re-scored run once (by its new score).
    mixed = collect(runs, results_dir=tmp_path, policy="mean", weights={}, all_versions=True)
    cell = mixed.cell(*CELL)
    assert sorted(cell.selected) == sorted([rescored.id, other.id])
    assert cell.version_note.startswith("mixes scores of 3 task versions")
    html = render_report(board, runs, tmp_path / "res")
    assert "task versions mixed" in html and "re-score" in html


def test_one_version_gives_no_note(tmp_path: Path) -> None:
    runs = [_versioned(r, "tv-0000000000000001", 0) for r in _records(tmp_path, [TrialSpec()])]
    cell = collect(runs, results_dir=tmp_path, policy="mean", weights={}).cell(*CELL)
    assert cell.version_note is None and cell.task_version == "tv-0000000000000001"


def _vote(flagged: bool) -> LlmVote:
    return LlmVote(model="judge-model", flagged=flagged, justification="")


def test_vote_agreement_is_recorded_and_low_agreement_is_reported(tmp_path: Path) -> None:
    split = Judgement(
        judge="anomaly",
        flagged=True,
        decided_by="llm",
        justification="",
        llm_votes=[_vote(True), _vote(False), _vote(True)],
    )
    assert split.vote_agreement == pytest.approx(2 / 3) and split.low_agreement
    assert Judgement.model_validate_json(split.model_dump_json()) == split
    tie = split.model_copy(update={"llm_votes": [_vote(True), _vote(False)]})
    assert Judgement.model_validate(tie.model_dump()).vote_agreement == 0.5
    one = Judgement(judge="anomaly", flagged=False, decided_by="llm", justification="")
    assert one.vote_agreement is None and not one.low_agreement
    (record,) = _records(tmp_path, [TrialSpec()])
    unanimous = split.model_copy(update={"llm_votes": [_vote(False)] * 3})
    records = [
        record.model_copy(update={"verdicts": [Judgement.model_validate(split.model_dump())]}),
        record.model_copy(
            update={"id": "b", "verdicts": [Judgement.model_validate(unanimous.model_dump())]}
        ),
    ]
    (row,) = judge_agreement(records)
    assert (row.judge, row.n_verdicts, row.n_votes) == ("anomaly", 2, 6)
    assert row.mean_agreement == pytest.approx((2 / 3 + 1) / 2)
    assert row.low_agreement == [record.id]
    board = collect(records, results_dir=tmp_path, policy="mean", weights={})
    assert board.judge_agreement == [row]
    assert "Judge agreement" in render_report(board, records, tmp_path / "res")


def test_rescore_plan_says_why_a_run_cannot_be_rescored(tmp_path: Path) -> None:
    records = _records(
        tmp_path,
        [
            TrialSpec(final_model=True),
            TrialSpec(),
            TrialSpec(error="EnvironmentStartTimeoutError", score=None),
        ],
    )
    records.append(records[0].model_copy(update={"id": "nm", "status": "no_model", "score": None}))
    store = ResultsStore.open(tmp_path / "res", create=False)
    # Exported without --with-final-model: nothing stored to score again.
    candidates, refused = plan(records, store.runs)
    assert candidates == []
    whys = sorted(r.why for r in refused)
    assert any("--with-final-model" in w for w in whys)
    assert any("no usable final_model" in w for w in whys)
    assert any("re-run it rather than re-score it" in w for w in whys)
    # Stored with its model: that run (only) can be scored again.
    export([tmp_path / "jobs"], tmp_path / "with-model", with_final_model=True)
    stored = ResultsStore.open(tmp_path / "with-model", create=False)
    candidates, _ = plan(stored.load()[0], stored.runs)
    (candidate,) = candidates
    assert candidate.final_model.is_dir() and candidate.spec.benchmark == "gsm8k"
    assert plan(stored.load()[0], stored.runs, benchmarks=["bfcl"]) == ([], [])
    with pytest.raises(PtbError, match="no agent run 'nosuch'"):
        plan(records, store.runs, run_ids=["nosuch"])


def test_rescore_command_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_ptb("rescore", str(tmp_path), "--runs-dir", str(tmp_path / "r"))
    assert result.returncode == 2 and "not a results store" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    result = run_ptb("rescore", str(tmp_path), "--env", "modal")
    assert result.returncode == 2 and "'modal' is not one of 'local', 'docker'" in result.stderr
