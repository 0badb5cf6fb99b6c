"""PostTrainBench's results layout: `ptb results export --layout ptb` read by its own collect.py,
and `ptb results import` of its results, bad input included."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from posttrainbench.host.results.ptb_layout import LayoutError, RunDirName, method_name
from posttrainbench.host.results.store import ResultsStore
from tests.helpers import run_ptb
from tests.ptb_collect_checks import check_ptb_collect, read_final_csvs, run_ptb_collect
from tests.results_fixtures import T0, TrialSpec, sql, write_job

CLAUDE = "claude-code_anthropic_claude-opus-4-1_10h"
CODEX = "codex_openai_gpt-5_10h"
AGENTS = {"claude-code:anthropic/claude-opus-4-1": CLAUDE, "codex:openai/gpt-5": CODEX}


def _trials(tmp_path: Path) -> Path:
    """One store whose cells exercise each of PostTrainBench's rules."""
    later = T0 + timedelta(hours=3)
    write_job(
        tmp_path / "jobs",
        "sweep",
        [
            # latest run wins, even when an earlier one scored higher
            TrialSpec(score=0.8),
            TrialSpec(score=0.6, started=later),
            # the latest run errored: the baseline, not the earlier good run
            TrialSpec(benchmark="humaneval", score=0.5),
            TrialSpec(
                benchmark="humaneval", score=0.5, started=later, error="NonZeroAgentExitCodeError"
            ),
            # flagged by a judge behind its contamination verdict
            TrialSpec(benchmark="bfcl", score=0.9, flagged=("benchmark_lookup",)),
            # flagged by a judge behind its disallowed-use verdict
            TrialSpec(benchmark="gpqamain", score=0.7, flagged=("api_usage",)),
            # not judged: a missing judgement is an error there, never clean
            TrialSpec(benchmark="aime2025", score=0.3, judged=False),
            # no usable model
            TrialSpec(model="qwen3-4b", score=0.0, verifier_error="final_model not found"),
            # two runs started in the same second: still two run ids, in start order
            TrialSpec(
                agent="codex",
                agent_model="openai/gpt-5",
                score=0.4,
                trial_id="0" * 8 + "-0000-4000-8000-" + "0" * 12,
            ),
            TrialSpec(
                agent="codex",
                agent_model="openai/gpt-5",
                score=0.2,
                trial_id="f" * 8 + "-0000-4000-8000-" + "0" * 12,
            ),
        ],
    )
    store = tmp_path / "store"
    done = run_ptb("results", "export", str(tmp_path / "jobs"), "-o", str(store))
    assert done.returncode == 0, done.stderr
    return store


def test_its_collect_py_on_our_export_gives_the_leaderboard_cells(tmp_path: Path) -> None:
    store = _trials(tmp_path)
    csvs = check_ptb_collect(store, tmp_path / "check", AGENTS)
    claude = csvs[CLAUDE]
    assert float(claude[("gsm8k", "Qwen3-1.7B-Base")]) == 0.6  # the latest, not the best
    # Baselines (its baselines.json zeroshot) wherever its rules fall back.
    zeroshot = json.loads((Path("tests/fixtures/posttrainbench/baselines.json")).read_text())
    base = zeroshot["zeroshot"]["Qwen3-1.7B-Base"]
    for bench in ("humaneval", "bfcl", "gpqamain", "aime2025"):
        assert float(claude[(bench, "Qwen3-1.7B-Base")]) == base[bench], bench
    assert (
        float(claude[("gsm8k", "Qwen3-4B-Base")]) == zeroshot["zeroshot"]["Qwen3-4B-Base"]["gsm8k"]
    )
    # The second of two runs started in the same second is the latest.
    assert float(csvs[CODEX][("gsm8k", "Qwen3-1.7B-Base")]) == 0.2
    ptb = tmp_path / "check" / "ptb"
    codex_runs = sorted(p.name for p in (ptb / CODEX).iterdir())
    stamp = int((T0 + timedelta(minutes=0)).timestamp())
    assert codex_runs == [
        f"gsm8k_Qwen_Qwen3-1.7B-Base_{stamp}",
        f"gsm8k_Qwen_Qwen3-1.7B-Base_{stamp + 1}",
    ]
    # Its contamination CSV says why: C, M, and an error for the unjudged run.
    flags = (tmp_path / "check" / "ptb-csv" / f"contamination_{CLAUDE}.csv").read_text()
    header, first = flags.splitlines()[:2]
    row = dict(zip(header.split(","), first.split(","), strict=True))
    assert (row["bfcl"], row["gpqamain"], row["aime2025"]) == ("C", "M", "C:ERR M:ERR")
    run = ptb / CLAUDE / f"gsm8k_Qwen_Qwen3-1.7B-Base_{int(T0.timestamp()) + 3 * 3600}"
    assert (run / "time_taken.txt").read_text() == "2:00:00\n"
    assert "I will fine-tune" in (run / "solve_parsed.txt").read_text()
    assert json.loads((run / "judge_result.json").read_text())["contamination"] is False


def test_import_round_trip_keeps_the_cells_and_the_names(tmp_path: Path) -> None:
    store = _trials(tmp_path)
    exported = run_ptb(
        "results", "export", str(store), "--layout", "ptb", "-o", str(tmp_path / "ptb")
    )
    assert exported.returncode == 0, exported.stderr
    imported = run_ptb(
        "results", "import", str(tmp_path / "ptb"), "-o", str(tmp_path / "back"), "--json"
    )
    summary = json.loads(imported.stdout)
    # The two runs our judges did not decide have no judgement files: not importable.
    assert imported.returncode == 2 and len(summary["skipped"]) == 2, imported.stdout
    assert all("missing judgement" in line for line in summary["skipped"])
    assert len(summary["added"]) == 8
    again = run_ptb(
        "results", "import", str(tmp_path / "ptb"), "-o", str(tmp_path / "back"), "--json"
    )
    assert json.loads(again.stdout)["unchanged"] == 8
    # Each method is its own agent; the imported store's cells are its collect.py's.
    expected = read_final_csvs(run_ptb_collect(tmp_path / "ptb", tmp_path / "orig"))
    csvs = check_ptb_collect(tmp_path / "back", tmp_path / "check", {CLAUDE: CLAUDE, CODEX: CODEX})
    for method, cells in csvs.items():
        for key, text in cells.items():
            if key[0] not in ("aime2025",) and key != ("humaneval", "Qwen3-1.7B-Base"):
                assert text == expected[method][key], (method, key)
    # Runs go back out under the names they came in with.
    names = {p.name for p in (tmp_path / "check" / "ptb" / CLAUDE).iterdir()}
    assert names <= {p.name for p in (tmp_path / "ptb" / CLAUDE).iterdir()}


def _htcondor_run(method: Path, name: str, **files: str | None) -> Path:
    """A run dir as PostTrainBench's run_task.sh leaves it (keyword `a__b` is file `a.b`;
    None leaves a default file out)."""
    run = method / name
    run.mkdir(parents=True)
    defaults = {
        "metrics.json": '{"accuracy": 0.5, "stderr": 0.01}',
        "contamination_judgement.txt": "no contamination detected\n",
        "disallowed_model_judgement.txt": "only allowed use detected\n",
        "time_taken.txt": "9:59:58\n",
        "solve_out.txt": '{"type": "text"}\n',
    }
    given = {file.replace("__", "."): text for file, text in files.items()}
    for file, text in {**defaults, **given}.items():
        if text is not None:
            (run / file).write_text(text)
    return run


def test_bad_input_imports_what_it_can_lists_the_rest_exit_2_store_unchanged(
    tmp_path: Path,
) -> None:
    results = tmp_path / "ptb_results"
    method = results / "claude_claude-opus-4-5_10h_final_v3"
    good = _htcondor_run(method, "gsm8k_Qwen_Qwen3-1.7B-Base_17000001")
    first = run_ptb("results", "import", str(results), "-o", str(tmp_path / "store"))
    assert first.returncode == 0 and "1 added" in first.stdout, first.stdout + first.stderr
    store = ResultsStore.open(tmp_path / "store", create=False)
    (before,), _ = store.load()
    stored_row = sql(tmp_path / "store", "SELECT * FROM runs")
    assert (before.agent, before.hours, before.score, before.flagged) == (
        method.name,
        10.0,
        0.5,
        False,
    )
    # The stored run's metrics.json goes bad, and bad run dirs appear beside a good new one.
    (good / "metrics.json").write_text('{"accuracy": ')
    _htcondor_run(
        method, "gsm8k_Qwen_Qwen3-1.7B-Base_17000002", metrics__json='{"accuracy": "high"}'
    )
    _htcondor_run(method, "gsm8k_Qwen_Qwen3-4B-Base_17000003", disallowed_model_judgement__txt=None)
    _htcondor_run(method, "mmlu_Qwen_Qwen3-4B-Base_17000004")
    _htcondor_run(method, "gsm8k_meta_Llama-3-8B_17000005")
    _htcondor_run(method, "gsm8k_Qwen3-4B-Base_17000006")
    _htcondor_run(method, "bfcl_Qwen_Qwen3-4B-Base_17000007", contamination_judgement__txt="maybe")
    added = _htcondor_run(method, "bfcl_Qwen_Qwen3-1.7B-Base_17000008")
    (results / "baseline_zeroshot").mkdir()
    result = run_ptb("results", "import", str(results), "-o", str(tmp_path / "store"))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("warning: skipped:")]
    why = {
        "17000001": "metrics.json: malformed (not JSON",
        "17000002": "metrics.json: malformed (accuracy",
        "17000003": "missing judgement: no disallowed_model_judgement.txt, no judge_result.json",
        "17000004": "unknown benchmark 'mmlu'",
        "17000005": "unknown base model 'meta/Llama-3-8B'",
        "17000006": "not <benchmark>_<org>_<model>_<run id>",
        "17000007": "contamination_judgement.txt: 'maybe' is not a verdict",
    }
    assert len(lines) == len(why), result.stderr
    for run_id, reason in why.items():
        assert sum(run_id in line and reason in line for line in lines) == 1, (run_id, lines)
    assert "ignored" in result.stderr and "baseline_zeroshot" in result.stderr
    assert "1 added, 0 updated, 0 unchanged, 7 skipped" in result.stdout
    # What was stored is as it was; the one good new run is added beside it.
    records, _ = store.load()
    assert [r for r in records if r.id == before.id] == [before]
    assert stored_row[0] in sql(tmp_path / "store", "SELECT * FROM runs")
    (new,) = [r for r in records if r.id != before.id]
    assert new.trial_name == added.name and new.benchmark == "bfcl" and new.score == 0.5


def test_judge_result_json_of_new_judge_v2_is_read_when_the_text_files_are_absent(
    tmp_path: Path,
) -> None:
    method = tmp_path / "ptb" / "codex_non_api_high_gpt-5.4_10h_run1"
    verdict = {
        "contamination": True,
        "disallowed_model": False,
        "justification_contamination": "[gpt5_4] trained on the test split",
        "justification_disallowed_model": "[gpt5_4] base model only",
        "disallowed_api_usage": False,
        "justification_disallowed_api_usage": "none",
    }
    _htcondor_run(
        method,
        "aime2025_Qwen_Qwen3-4B-Base_99",
        contamination_judgement__txt=None,
        disallowed_model_judgement__txt=None,
        judge_result__json=json.dumps(verdict),
        metrics__json=None,
    )
    done = run_ptb("results", "import", str(tmp_path / "ptb"), "-o", str(tmp_path / "store"))
    assert done.returncode == 0, done.stderr
    (record,), _ = ResultsStore.open(tmp_path / "store", create=False).load()
    assert record.flagged is True and record.status == "no_model"  # no metrics, no final_model
    assert "trained on the test split" in record.verdicts[0].justification


def test_names_its_split_cannot_read_are_refused() -> None:
    assert str(RunDirName.of("gsm8k", "Qwen/Qwen3-1.7B-Base", 7)) == "gsm8k_Qwen_Qwen3-1.7B-Base_7"
    for hf_id in ("gpt2", "org/my_model", "org/a:b"):
        with pytest.raises(LayoutError):
            RunDirName.of("gsm8k", hf_id, 1)
    assert method_name("oracle", None, 1.0, 1) == "oracle__1h"
    assert method_name("codex", "openai/gpt-5", 0.5, 2) == "codex_openai_gpt-5_0.5h_2gpu"
    with pytest.raises(LayoutError):
        method_name("codex", None, None, 1)


def test_export_lists_a_run_it_cannot_name_and_exits_2(tmp_path: Path) -> None:
    write_job(tmp_path / "jobs", "j", [TrialSpec(model="my_model"), TrialSpec()])
    assert (
        run_ptb("results", "export", str(tmp_path / "jobs"), "-o", str(tmp_path / "s")).returncode
        == 0
    )
    done = run_ptb(
        "results", "export", str(tmp_path / "s"), "--layout", "ptb", "-o", str(tmp_path / "p")
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("warning: skipped:")]
    assert "org/my_model" in line and "'_'" in line
    assert "wrote 1 run(s)" in done.stdout
    # A results dir that is not empty is never written into.
    again = run_ptb(
        "results", "export", str(tmp_path / "s"), "--layout", "ptb", "-o", str(tmp_path / "p")
    )
    assert again.returncode != 0 and "not empty" in again.stderr
