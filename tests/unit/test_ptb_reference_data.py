"""The catalog's baselines and weights are PostTrainBench's, number for number, and the
leaderboard's fallback and weighted average are computed as PostTrainBench computes them.

The pinned, verbatim copies of its files are in tests/fixtures/posttrainbench/ (README.md
there names repository, branch, commit and licence).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from posttrainbench.host.catalog import list_benchmarks, list_models
from posttrainbench.host.catalog.baselines import list_baselines, ptb_baselines
from posttrainbench.host.catalog.weights import ptb_weights
from posttrainbench.host.results.collect import collect
from posttrainbench.host.results.export import export
from posttrainbench.host.results.reference_scores import load_weights
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.task.benchmarks.plugin import plugins
from tests.results_fixtures import TrialSpec, write_job

PINNED = Path(__file__).parents[1] / "fixtures" / "posttrainbench"
BASELINES = json.loads((PINNED / "baselines.json").read_text())
FACTORS = json.loads((PINNED / "factors.json").read_text())
README = (PINNED / "README.md").read_text()

# catalog field of data/baselines.json -> (section of PTB's file, which model's row)
SECTIONS = {"zero_shot": ("zeroshot", "base"), "few_shot": ("fewshot", "base")}
SECTIONS["instruct"] = ("zeroshot", "instruct")


def _ptb_name(row, which: str) -> str:
    return row.ptb_base if which == "base" else row.ptb_instruct


def test_the_catalog_holds_every_score_of_ptb_baselines_json() -> None:
    data = ptb_baselines()
    seen: dict[str, set[str]] = {"zeroshot": set(), "fewshot": set()}
    for row in data.models:
        for field, (section, which) in SECTIONS.items():
            name = _ptb_name(row, which)
            assert getattr(row, field) == BASELINES[section][name], (row.model, field)
            seen[section].add(name)
    # Every model of every section is in the catalog: none is left out.
    assert set(BASELINES) == set(seen)
    assert all(seen[s] == set(BASELINES[s]) for s in seen)


def test_each_ptb_model_is_the_catalog_model_it_names() -> None:
    """PostTrainBench names a base model by its HF repository (compute_baseline_metrics.py:17-27
    pairs it with its instruct model); the catalog's source is that repository."""
    sources = {m.id: m.source for m in list_models() if not m.offline}
    rows = {row.model: row for row in ptb_baselines().models}
    assert set(rows) == set(sources)
    for model, row in rows.items():
        assert sources[model].rsplit("/", 1)[1] == row.ptb_base
    assert {r.ptb_instruct for r in rows.values()} == {
        "Qwen3-1.7B",
        "Qwen3-4B",
        "SmolLM3-3B",
        "gemma-3-4b-it",
    }
    benchmarks = {b.id for b in list_benchmarks()}
    for section in BASELINES.values():
        assert all(set(scores) == benchmarks for scores in section.values())


def test_list_baselines_has_each_model_and_benchmark_with_provenance() -> None:
    entries = {(e.benchmark, e.model, e.kind): e for e in list_baselines()}
    for row in ptb_baselines().models:
        for field, (section, which) in SECTIONS.items():
            name = _ptb_name(row, which)
            for benchmark, score in BASELINES[section][name].items():
                entry = entries[(benchmark, row.model, field)]
                assert entry.score == score
                assert f"{section}[{name!r}]" in entry.provenance
                assert "aisa-group/PostTrainBench@2d6f1d5" in entry.provenance
    # The offline demo model's target: the instruct mean of the four, derived from the file.
    for benchmark in FACTORS:
        instruct = [
            BASELINES["zeroshot"][r.ptb_instruct][benchmark] for r in ptb_baselines().models
        ]
        mean = entries[(benchmark, "*", "instruct")].score
        assert mean == pytest.approx(sum(instruct) / 4)


def test_the_weights_are_ptb_factors_json() -> None:
    assert ptb_weights().weights == FACTORS
    assert set(FACTORS) == set(plugins())
    # The default leaderboard weights: PostTrainBench's, not the plugins' `weight`.
    assert {b: w for b, w in load_weights().items() if b in FACTORS} == FACTORS


def test_each_number_has_one_home() -> None:
    """The benchmark plugins of PostTrainBench's benchmarks publish no baselines of their own."""
    assert not [b for b, p in plugins().items() if b in FACTORS and p.baselines]


@pytest.mark.parametrize("data", [ptb_baselines(), ptb_weights()], ids=["baselines", "weights"])
def test_provenance_matches_the_pinned_copy(data) -> None:
    source = data.source
    assert (source.repo, source.license) == ("aisa-group/PostTrainBench", "MIT")
    pinned = PINNED / Path(source.file).name
    row = next(line for line in README.splitlines() if line.startswith(f"| `{pinned.name}`"))
    assert re.findall(r"`([^`]+)`", row) == [pinned.name, source.branch, source.commit, source.file]
    assert source.copyright in README and "MIT License" in README


def _ptb_compute_weighted_metric(data: dict[str, dict[str, str]], factors: dict) -> float:
    """PostTrainBench's scripts/aggregate.py:104-125 (qol_multigpu), as written there."""
    valid_benchmarks = set(factors.keys())
    total = 0.0
    num_models = len(data)
    for bench in sorted(valid_benchmarks):
        values = []
        for model in data:
            val_str = data[model].get(bench, "")
            if val_str == "":
                continue
            values.append(float(val_str))
        if values:
            avg_value = sum(values) / num_models
            total += avg_value * factors[bench]
    return total


def test_the_leaderboard_is_ptb_fallback_and_weighted_metric(tmp_path: Path) -> None:
    """A full grid (7 benchmarks x 4 base models) with a contaminated, a disallowed-model and
    an errored cell: the zero-shot baseline stands in as in collect.py:123-140, and the
    weighted average is PostTrainBench's single metric of that final table."""
    rows = {r.model: r for r in ptb_baselines().models}
    benchmarks = sorted(FACTORS)
    specs, expected = [], {}
    odd = {
        ("gpqamain", "qwen3-4b"): {"flagged": ("contamination",)},
        ("aime2025", "gemma3-4b"): {"flagged": ("disallowed_model",)},
        ("healthbench", "smollm3-3b"): {"error": "AgentTimeoutError", "score": None},
    }
    for i, (benchmark, model) in enumerate((b, m) for b in benchmarks for m in rows):
        score = round(0.05 + 0.031 * i, 4)
        extra = odd.get((benchmark, model), {})
        specs.append(TrialSpec(**{"benchmark": benchmark, "model": model, "score": score, **extra}))
        name = rows[model].ptb_base
        fallback = BASELINES["zeroshot"][name][benchmark]
        expected.setdefault(name, {})[benchmark] = str(fallback if extra else score)
    write_job(tmp_path / "jobs", "job", specs)
    export([tmp_path / "jobs"], tmp_path / "res")
    records, _ = ResultsStore.open(tmp_path / "res", create=False).load()
    board = collect(records, results_dir=tmp_path, policy="mean", weights=load_weights())

    for (benchmark, model), extra in odd.items():
        cell = board.cell(board.agents[0].agent, benchmark, model)
        assert cell.source == "baseline"
        assert cell.fallback == ("flagged" if "flagged" in extra else "errored")
        assert str(cell.score) == expected[rows[model].ptb_base][benchmark]
    (agent,) = board.agents
    assert agent.n_fallback == len(odd)
    ptb = _ptb_compute_weighted_metric(expected, FACTORS)
    # Equal but for the sum of the factors, 1 - 1.3e-15, that the average divides by.
    assert agent.weighted_average == pytest.approx(ptb, rel=1e-12)
    assert board.weights == FACTORS
