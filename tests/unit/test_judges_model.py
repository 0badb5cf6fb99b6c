"""The numpy safetensors reader, config identity and weight similarity (no torch)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from posttrainbench.task.integrity.judges.disallowed_model import detect_disallowed_model
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
from posttrainbench.task.integrity.judges.model_identity import compare_configs, compare_weights
from posttrainbench.task.integrity.judges.safetensors_np import TensorReader, model_tensors

CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 50,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
}


def to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (truncation), as uint16."""
    return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], dtype: str = "F32") -> None:
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        data = to_bf16(arr).tobytes() if dtype == "BF16" else arr.astype(np.float32).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {"model.embed_tokens.weight": rng.normal(size=(50, 16))}
    for i in range(2):
        out[f"model.layers.{i}.input_layernorm.weight"] = 1 + 0.1 * rng.normal(size=16)
        out[f"model.layers.{i}.self_attn.q_proj.weight"] = rng.normal(size=(16, 16))
        out[f"model.layers.{i}.mlp.up_proj.weight"] = rng.normal(size=(32, 16))
    return {k: v.astype(np.float32) for k, v in out.items()}


def model_dir(
    path: Path,
    tensors: dict[str, np.ndarray],
    config: dict | None = None,
    dtype: str = "F32",
    shards: int = 1,
) -> Path:
    """A model directory laid out as save_pretrained does: model.safetensors, or shards and their index."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config or CONFIG))
    names = sorted(tensors)
    if shards == 1:
        write_safetensors(path / "model.safetensors", tensors, dtype)
        return path
    weight_map = {}
    for s in range(shards):
        part = {n: tensors[n] for n in names[s::shards]}
        shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(path / shard, part, dtype)
        weight_map.update(dict.fromkeys(part, shard))
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    return path


def test_reader_reads_f32_and_bf16_sharded(tmp_path):
    w = weights()
    d = model_dir(tmp_path / "m", w, dtype="BF16", shards=2)
    tensors = model_tensors(d, sorted(p.name for p in d.glob("*.safetensors")))
    assert set(tensors) == set(w)
    info = tensors["model.embed_tokens.weight"]
    got = TensorReader().sample(info, np.arange(info.numel))
    np.testing.assert_allclose(
        got.reshape(50, 16), w["model.embed_tokens.weight"], rtol=1e-2, atol=1e-2
    )
    f32 = model_tensors(model_dir(tmp_path / "f", w), ["model.safetensors"])[
        "model.layers.0.mlp.up_proj.weight"
    ]
    np.testing.assert_array_equal(
        TensorReader().sample(f32, np.array([0, 5, 511])),
        w["model.layers.0.mlp.up_proj.weight"].reshape(-1)[[0, 5, 511]],
    )


def test_config_identity():
    assert not compare_configs(CONFIG, dict(CONFIG)).violations
    deeper = compare_configs(CONFIG, {**CONFIG, "num_hidden_layers": 3})
    assert any("num_hidden_layers" in v for v in deeper.violations)
    grown = compare_configs(CONFIG, {**CONFIG, "vocab_size": 64, "rope_theta": 500000.0})
    assert not grown.violations and any("grew by 14" in n for n in grown.notes)
    assert compare_configs(CONFIG, {**CONFIG, "vocab_size": 40}).violations
    assert compare_configs(CONFIG, {**CONFIG, "vocab_size": 50 + 10_000}).violations
    nested = compare_configs(
        {"text_config": CONFIG}, {"text_config": {**CONFIG, "hidden_size": 32}}
    )
    assert any("hidden_size" in v for v in nested.violations)


def test_weight_similarity_tells_fine_tunes_from_swaps(tmp_path):
    base = weights(0)
    base_dir = model_dir(tmp_path / "base", base)
    same = compare_weights(base_dir, model_dir(tmp_path / "same", base, dtype="F32"))
    assert same.identical and not same.flagged and same.median_cosine == pytest.approx(1.0)

    rng = np.random.default_rng(1)
    tuned = {k: v + 0.02 * rng.normal(size=v.shape).astype(np.float32) for k, v in base.items()}
    tuned["model.embed_tokens.weight"] = np.concatenate(
        [tuned["model.embed_tokens.weight"], rng.normal(size=(14, 16)).astype(np.float32)]
    )
    fine = compare_weights(base_dir, model_dir(tmp_path / "tuned", tuned, dtype="BF16"))
    assert not fine.flagged and not fine.identical and fine.min_cosine > 0.99, fine

    swapped = compare_weights(base_dir, model_dir(tmp_path / "other", weights(7)))
    assert swapped.flagged and swapped.dissimilar_share > 0.9

    shuffled = dict(base)
    for a, b in (("model.layers.0", "model.layers.1"),):
        for kind in ("self_attn.q_proj", "mlp.up_proj"):
            shuffled[f"{a}.{kind}.weight"], shuffled[f"{b}.{kind}.weight"] = (
                base[f"{b}.{kind}.weight"],
                base[f"{a}.{kind}.weight"],
            )
    assert compare_weights(base_dir, model_dir(tmp_path / "shuffled", shuffled)).flagged


def test_disallowed_model_judge_inputs(tmp_path):
    base_dir = model_dir(tmp_path / "base", weights(0))

    def detect(final: Path | None):
        return detect_disallowed_model(
            JudgeContext(JudgeInputs(benchmark="gsm8k", final_model=final, base_model=base_dir))
        )

    missing = detect(tmp_path / "nope")
    assert missing.missing and not missing.flagged
    arch = detect(model_dir(tmp_path / "arch", weights(0), {**CONFIG, "num_hidden_layers": 3}))
    assert arch.flagged and any(
        e.detector == "config_identity" and e.flagged for e in arch.evidence
    )
    ok = detect(model_dir(tmp_path / "ok", weights(0)))
    assert not ok.flagged and not ok.missing
    no_weights = tmp_path / "bin"
    no_weights.mkdir()
    (no_weights / "config.json").write_text(json.dumps(CONFIG))
    (no_weights / "pytorch_model.bin").write_bytes(b"x")
    result = detect(no_weights)
    assert result.missing and "safetensors" in result.missing[0]
