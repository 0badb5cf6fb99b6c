"""The sampling PostTrainBench's final evaluation ends up using: vLLM 0.11's defaults.

PostTrainBench's ``evaluate.py`` passes inspect only ``max_tokens``; inspect's vLLM
provider sends no temperature, top_p, top_k or seed, so ``vllm serve`` (its default
``--generation-config auto``) fills each request from the evaluated model's
``generation_config.json`` (``vllm/config/model.py`` ``get_diff_sampling_param``: the
file's ``to_diff_dict()``, i.e. only values that differ from transformers' defaults, and
of those only the fields below), else from its neutral values (``protocol.py``
``_DEFAULT_SAMPLING_PARAMS``: temperature 1.0, top_p 1.0, top_k off, min_p 0,
repetition_penalty 1.0). A ``max_new_tokens`` there caps every answer. Without a
``generation_config.json`` the values come from ``config.json`` the same way.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from ..benchmarks.base import GenerationSettings

# transformers' GenerationConfig defaults: a value equal to one is not in to_diff_dict().
_HF_DEFAULTS: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 50,
    "min_p": None,
    "repetition_penalty": 1.0,
    "max_new_tokens": None,
}
# What vLLM uses for a field the model does not set.
_VLLM_NEUTRAL: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
}
# The generation fields vLLM takes from a model (the only ones a model may set freely:
# evaluation.model_files).
VLLM_SAMPLING_FIELDS: tuple[str, ...] = tuple(_HF_DEFAULTS)
_MAX_CONFIG_BYTES = 1 << 20


class SamplingConfigError(ValueError):
    """The model's generation config sets a value vLLM would reject."""


def _read(path: Path) -> dict[str, Any] | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_CONFIG_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def model_sampling(model_path: str | Path) -> dict[str, Any]:
    """The sampling fields vLLM takes from the model directory (only those it sets)."""
    root = Path(model_path)
    config = _read(root / "generation_config.json")
    if config is None:
        config = _read(root / "config.json") or {}
    return {
        key: config[key]
        for key in _HF_DEFAULTS
        if key in config and config[key] is not None and config[key] != _HF_DEFAULTS[key]
    }


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SamplingConfigError(f"generation_config.json: {key} = {value!r} is not a number")
    return float(value)


def posttrainbench_sampling(
    settings: GenerationSettings, model_path: str | Path
) -> GenerationSettings:
    """*settings* with the sampling vLLM would use for this model (one seed, as one epoch;
    the model's ``max_new_tokens`` is :func:`token_cap`'s).

    Raises :class:`SamplingConfigError` for a value vLLM's request validation refuses
    (PostTrainBench then scores the error text: 0).
    """
    found = model_sampling(model_path)
    values = {**_VLLM_NEUTRAL, **{k: v for k, v in found.items() if k != "max_new_tokens"}}
    temperature = _number("temperature", values["temperature"])
    top_p = _number("top_p", values["top_p"])
    top_k = _number("top_k", values["top_k"])
    min_p = _number("min_p", values["min_p"])
    penalty = _number("repetition_penalty", values["repetition_penalty"])
    if temperature < 0 or not 0 < top_p <= 1 or not 0 <= min_p <= 1 or penalty <= 0:
        raise SamplingConfigError(f"generation_config.json: sampling values out of range: {found}")
    if top_k != int(top_k) or top_k < -1:
        raise SamplingConfigError(f"generation_config.json: top_k = {values['top_k']!r}")
    if "max_new_tokens" in found:  # applied by the caller to every cap it tries (token_cap)
        limit = _number("max_new_tokens", found["max_new_tokens"])
        if limit < 1 or limit != int(limit):
            raise SamplingConfigError(f"generation_config.json: max_new_tokens = {limit!r}")
    return dataclasses.replace(
        settings,
        temperature=temperature,
        top_p=top_p,
        top_k=max(0, int(top_k)),  # vLLM: 0 and -1 both mean no top-k
        min_p=min_p,
        repetition_penalty=penalty,
        num_seeds=1,
    )


def token_cap(model_path: str | Path) -> int | None:
    """The model's own ``max_new_tokens`` (vLLM caps every request at it), if it sets one."""
    value = model_sampling(model_path).get("max_new_tokens")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        return None
    return int(value)
