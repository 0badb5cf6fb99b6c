"""The posttrainbench variant decodes with what vLLM 0.11 takes from the model's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.task.benchmarks.base import GenerationSettings
from posttrainbench.task.evaluation.sampling import (
    SamplingConfigError,
    model_sampling,
    posttrainbench_sampling,
    token_cap,
)

BENCH = GenerationSettings(max_new_tokens=512, temperature=0.0, num_seeds=4)


def _model(tmp_path: Path, generation: dict | None, config: dict | None = None) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config or {"architectures": ["X"]}))
    if generation is not None:
        (tmp_path / "generation_config.json").write_text(json.dumps(generation))
    return tmp_path


def test_no_generation_config_is_plain_sampling_at_temperature_one(tmp_path):
    settings = posttrainbench_sampling(BENCH, _model(tmp_path, None))
    assert (settings.temperature, settings.top_p, settings.top_k) == (1.0, 1.0, 0)
    assert (settings.min_p, settings.repetition_penalty, settings.num_seeds) == (0.0, 1.0, 1)
    assert settings.max_new_tokens == 512 and token_cap(tmp_path) is None


def test_the_models_sampling_fields_are_used(tmp_path):
    qwen = {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0}
    settings = posttrainbench_sampling(BENCH, _model(tmp_path, qwen))
    assert (settings.temperature, settings.top_p, settings.top_k) == (0.6, 0.95, 20)


def test_do_sample_false_is_ignored_as_vllm_ignores_it(tmp_path):
    settings = posttrainbench_sampling(BENCH, _model(tmp_path, {"do_sample": False}))
    assert settings.temperature == 1.0


def test_values_equal_to_transformers_defaults_are_not_passed(tmp_path):
    """to_diff_dict() drops top_k 50 (transformers' default): vLLM then uses no top-k."""
    found = model_sampling(_model(tmp_path, {"top_k": 50, "temperature": 1.0, "top_p": 0.8}))
    assert found == {"top_p": 0.8}
    assert posttrainbench_sampling(BENCH, tmp_path).top_k == 0


def test_greedy_by_config_and_a_token_cap(tmp_path):
    model = _model(tmp_path, {"temperature": 0.0, "max_new_tokens": 300, "repetition_penalty": 1.1})
    settings = posttrainbench_sampling(BENCH, model)
    assert settings.temperature == 0.0 and settings.repetition_penalty == 1.1
    assert token_cap(model) == 300


def test_without_generation_config_json_config_json_is_read(tmp_path):
    model = _model(tmp_path, None, {"architectures": ["X"], "temperature": 0.7})
    assert posttrainbench_sampling(BENCH, model).temperature == 0.7


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": -1},
        {"top_p": 0},
        {"top_p": 1.5},
        {"top_k": -5},
        {"top_k": 2.5},
        {"repetition_penalty": 0},
        {"min_p": 2},
        {"temperature": "hot"},
        {"max_new_tokens": 0},
    ],
)
def test_values_vllm_refuses_are_an_error(tmp_path, bad):
    with pytest.raises(SamplingConfigError):
        posttrainbench_sampling(BENCH, _model(tmp_path, bad))


def test_a_linked_or_huge_config_is_not_read(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"temperature": 0.1}))
    model = tmp_path / "m"
    model.mkdir()
    (model / "generation_config.json").symlink_to(outside)
    assert model_sampling(model) == {}
    (model / "generation_config.json").unlink()
    (model / "generation_config.json").write_text(" " * (2 << 20) + "{}")
    assert model_sampling(model) == {}
