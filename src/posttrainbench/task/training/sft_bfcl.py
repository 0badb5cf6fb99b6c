"""Reference post-training solution for BFCL: SFT on synthetic function-calling data.

Usage::

    python -m posttrainbench.task.training.sft_bfcl --base-model DIR --out final_model [--steps 20] [--max-minutes 50]

Honest by construction: the training examples come from :mod:`.synth_fc` (invented
schemas and requests); BFCL test questions are never read. Prompts are built exactly as
the evaluation builds them (the benchmark's messages and ``tools``, rendered by the
forced chat template with ``tools=``), and the answers are hermes ``<tool_call>`` JSON,
so the model learns the format vLLM's hermes parser reads.

CPU-friendly: a plain torch loop (AdamW, loss on the answer tokens only), only the top
``--train-layers`` decoder layers are trained (backward stops there), and the learning
rate follows a cosine over a fixed number of ``--steps``. The amount of training, and so
the gain, is the same on a busy machine as on an idle one; only its time grows.
``--max-minutes`` is a safety cap (e.g. the agent's deadline): training cut short by it
is reported with a warning and in ``ptb_training.json`` (``stopped_early``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

from ..benchmarks.base import Sample
from ..benchmarks.bfcl.benchmark import BfclExecSimple
from ..benchmarks.bfcl.tools import tools_json
from ..evaluation.chat_format import TEMPLATE_DIR, forced_template, read_model_config, render_chat
from .synth_fc import make_dataset


def encode_examples(
    tokenizer, examples: list[dict], max_len: int, template: str
) -> list[tuple[list[int], int]]:
    """(token ids, number of prompt tokens) per example; the rest are answer tokens.

    Prompts are rendered exactly as the evaluation renders them: the benchmark's
    messages and tools, the same forced chat template *template*.
    """
    bench = BfclExecSimple()
    eos = tokenizer.eos_token or ""
    out = []
    for i, ex in enumerate(examples):
        sample = Sample(
            id=f"synthetic_{i}",
            category="synthetic",
            data={"question": ex["question"], "tools": tools_json(ex["functions"])},
        )
        prompt = render_chat(bench.build_messages(sample), template, tokenizer, bench.tools(sample))
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        a_ids = tokenizer(ex["answer"] + eos, add_special_tokens=False)["input_ids"]
        ids = p_ids + a_ids
        if len(ids) <= max_len:
            out.append((ids, len(p_ids)))
    return out


def _batch(items, pad_id: int):
    import torch

    width = max(len(ids) for ids, _ in items)
    input_ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    attn = torch.zeros((len(items), width), dtype=torch.long)
    for row, (ids, n_prompt) in enumerate(items):  # right padding for training
        t = torch.tensor(ids)
        input_ids[row, : len(ids)] = t
        attn[row, : len(ids)] = 1
        labels[row, n_prompt : len(ids)] = t[n_prompt:]
    return input_ids, attn, labels


def _answer_loss(model, input_ids, attn, labels):
    """Next-token cross-entropy on answer tokens, projecting only those positions to the vocab.

    Equivalent to ``model(..., labels=labels).loss`` but skips the vocab projection for the
    (much longer) prompt, which is most of the compute on CPU.
    """
    import torch.nn.functional as F

    hidden = model.model(input_ids=input_ids, attention_mask=attn).last_hidden_state
    targets = labels[:, 1:]
    mask = targets != -100
    logits = model.lm_head(hidden[:, :-1][mask])
    return F.cross_entropy(logits.float(), targets[mask])


def _freeze_lower_layers(model, train_layers: int) -> int:
    """Train only the top *train_layers* decoder layers and the final norm."""
    for p in model.parameters():
        p.requires_grad_(False)
    layers = model.model.layers
    k = len(layers) if train_layers <= 0 else min(train_layers, len(layers))
    for layer in layers[len(layers) - k :]:
        for p in layer.parameters():
            p.requires_grad_(True)
    for p in model.model.norm.parameters():
        p.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# SmolLM2-135M: the forced smollm.jinja prompt (system turn, tools, question) is about
# 550 tokens, ~4x the old text prompt, so 20 steps take several times longer than the
# ~3 minutes they took before (see ptb_training.json's train_seconds).
DEFAULT_STEPS = 20
SAVE_RESERVE_S = 20.0  # kept back from --max-minutes to save the model


def train(
    base_model: str,
    out: str,
    steps: int = DEFAULT_STEPS,
    max_minutes: float | None = None,
    batch_size: int = 8,
    lr: float = 2e-4,
    train_layers: int = 12,
    n_examples: int = 4000,
    max_len: int = 1024,  # the forced templates' system turn and the tools are long
    seed: int = 0,
    model_name: str | None = None,
    templates_dir: Path = TEMPLATE_DIR,
) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..evaluation.backends import configure_threads

    t_start = time.perf_counter()
    threads = configure_threads()
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
    model.config.use_cache = False
    n_trainable = _freeze_lower_layers(model, train_layers)
    # The evaluation's template for this base model (its family from *model_name*, and
    # BFCL's own choice for a family, e.g. Gemma's tool-calling template).
    from ..benchmarks.plugin import plugins

    plugin = plugins().get(BfclExecSimple.id)
    template = forced_template(
        model_name or base_model,
        read_model_config(base_model),
        templates_dir,
        plugin.template_overrides if plugin else None,
    )
    data = encode_examples(tokenizer, make_dataset(n_examples, seed), max_len, template)
    rng.shuffle(data)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    cap_s = (
        None
        if max_minutes is None
        else max_minutes * 60.0 - (time.perf_counter() - t_start) - SAVE_RESERVE_S
    )
    warmup = 5
    model.train()
    t0 = time.perf_counter()
    step, losses = 0, []
    every = max(1, min(10, steps // 10))  # about ten progress lines, however few the steps
    while step < steps:
        if cap_s is not None and time.perf_counter() - t0 >= cap_s:
            break
        scale = min(1.0, (step + 1) / warmup) * 0.5 * (1.0 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr * max(scale, 0.05)
        start = (step * batch_size) % max(1, len(data) - batch_size)
        input_ids, attn, labels = _batch(data[start : start + batch_size], tokenizer.pad_token_id)
        loss = _answer_loss(model, input_ids, attn, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        step += 1
        if step % every == 0:
            recent = losses[-every:]
            print(
                f"step {step} loss {sum(recent) / len(recent):.4f} {time.perf_counter() - t0:.0f}s",
                flush=True,
            )
    train_s = time.perf_counter() - t0
    stopped_early = step < steps
    if stopped_early:
        print(
            f"WARNING: stopped at the {max_minutes:g}-minute cap after {step} of {steps} steps: "
            "this model is trained less than the reference",
            file=sys.stderr,
            flush=True,
        )
    model.eval()
    model.config.use_cache = True
    Path(out).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    summary = {
        "steps": step,
        "steps_planned": steps,
        "stopped_early": stopped_early,
        "examples_seen": step * batch_size,
        "batch_size": batch_size,
        "lr": lr,
        "train_layers": train_layers,
        "trainable_params": n_trainable,
        "threads": threads,
        "final_loss": sum(losses[-10:]) / max(1, len(losses[-10:])),
        "first_loss": losses[0] if losses else None,
        "train_seconds": round(train_s, 1),
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "data": f"synthetic (posttrainbench.task.training.synth_fc), seed {seed}",
    }
    (Path(out) / "ptb_training.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="SFT a base model for BFCL on synthetic data")
    p.add_argument("--base-model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help="optimizer steps: the amount of training"
    )
    p.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="safety cap on the whole run (default: none)",
    )
    p.add_argument("--batch-size", type=int, default=int(os.environ.get("PTB_SFT_BATCH", "8")))
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument(
        "--train-layers", type=int, default=12, help="top decoder layers to train (0 = all)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--model-name",
        default=None,
        help="the base model's name, whose family picks the chat template (default: its path)",
    )
    p.add_argument("--templates-dir", type=Path, default=TEMPLATE_DIR)
    args = p.parse_args(argv)
    summary = train(
        args.base_model,
        args.out,
        args.steps,
        args.max_minutes,
        args.batch_size,
        args.lr,
        args.train_layers,
        seed=args.seed,
        model_name=args.model_name,
        templates_dir=args.templates_dir,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
