"""The disallowed-model judge checks the tensors the loader reads, at positions nobody knew in advance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from posttrainbench.task.integrity.judges.disallowed_model import detect_disallowed_model
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
from posttrainbench.task.integrity.judges.model_identity import SAMPLES, compare_weights
from posttrainbench.task.integrity.judges.precedence import decide
from posttrainbench.task.integrity.judges.weight_files import resolve_load_plan
from tests.unit.test_judges_model import model_dir, weights, write_safetensors


def judge(base: Path, final: Path, max_bytes: int | None = None):
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", final_model=final, base_model=base))
    ctx.start_judge(max_bytes)
    return decide("disallowed_model", detect_disallowed_model(ctx), None, None)


def flagging(verdict, detector: str) -> list[str]:
    return [e.detail for e in verdict.evidence if e.detector == detector and e.flagged]


def test_a_decoy_copy_of_the_base_beside_random_weights_is_flagged(tmp_path):
    base = model_dir(tmp_path / "base", weights(0))
    final = model_dir(tmp_path / "final", weights(7))  # what the loader reads: another model
    shutil.copyfile(
        base / "model.safetensors", final / "model.shard2.safetensors"
    )  # sorts after it
    plan = resolve_load_plan(final)
    assert plan.files == ["model.safetensors"] and plan.decoys
    verdict = judge(base, final)
    assert verdict.flagged and any(
        "model.shard2.safetensors" in d for d in flagging(verdict, "weight_files")
    )
    similarity = flagging(verdict, "weight_similarity")
    assert similarity and "bit-identical" not in similarity[0]


def test_loader_redirects_and_mixed_layouts_are_decoys(tmp_path):
    redirected = model_dir(tmp_path / "redirect", weights(0))
    config = json.loads((redirected / "config.json").read_text())
    write_safetensors(redirected / "other.safetensors", weights(3))
    (redirected / "config.json").write_text(
        json.dumps({**config, "transformers_weights": "other.safetensors"})
    )
    plan = resolve_load_plan(redirected)
    assert plan.files == ["other.safetensors"] and any(
        "transformers_weights" in d for d in plan.decoys
    )

    both = model_dir(tmp_path / "both", weights(0), shards=2)  # an index and its shards...
    write_safetensors(
        both / "model.safetensors", weights(5)
    )  # ...and a single file transformers prefers
    plan = resolve_load_plan(both)
    assert plan.files == ["model.safetensors"] and len(plan.decoys) == 2

    sharded = model_dir(tmp_path / "sharded", weights(0), shards=2)
    (sharded / "training_args.bin").write_bytes(b"x")
    (sharded / "checkpoint").mkdir()
    write_safetensors(sharded / "checkpoint" / "model.safetensors", weights(0))
    plan = resolve_load_plan(sharded)
    assert (
        len(plan.files) == 2 and not plan.decoys and plan.unused == ["checkpoint/model.safetensors"]
    )


def test_keeping_the_base_at_predictable_positions_no_longer_passes(tmp_path):
    rng = np.random.default_rng(11)
    base_w = {
        f"model.layers.{i}.mlp.up_proj.weight": rng.normal(size=(256, 64)).astype(np.float32)
        for i in range(3)
    }
    base = model_dir(tmp_path / "base", base_w)
    attack = {}
    for (
        name,
        value,
    ) in (
        base_w.items()
    ):  # random, but the old judge's evenly spaced positions hold the base's values
        flat = rng.normal(size=value.size).astype(np.float32)
        fixed = np.unique(np.linspace(0, value.size - 1, num=SAMPLES).astype(np.int64))
        flat[fixed] = value.reshape(-1)[fixed]
        attack[name] = flat.reshape(value.shape)
    final = model_dir(tmp_path / "final", attack)
    reports = [compare_weights(base, final) for _ in range(2)]
    assert all(r.flagged for r in reports)
    assert reports[0].seed != reports[1].seed  # drawn afresh each time, from the OS
    verdict = judge(base, final)
    assert (
        verdict.flagged
        and verdict.sample_seed
        and verdict.sample_seed in flagging(verdict, "weight_similarity")[0]
    )


def test_a_fine_tune_with_its_own_template_passes(tmp_path):
    base = model_dir(tmp_path / "base", weights(0))
    rng = np.random.default_rng(2)
    tuned = {
        k: v + 0.01 * rng.normal(size=v.shape).astype(np.float32) for k, v in weights(0).items()
    }
    final = model_dir(tmp_path / "final", tuned)
    (final / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    verdict = judge(base, final)
    assert verdict.flagged is False, verdict.justification
    assert verdict.sample_seed


def test_clashing_names_and_links_are_flagged(tmp_path):
    base = model_dir(tmp_path / "base", weights(0))
    # Zeros under wrapper-prefixed names first, the base under the plain names last: a judge
    # that kept the last of each pair would call this the base.
    clash = {**{f"module.{k}": v * 0 for k, v in weights(0).items()}, **weights(0)}
    assert any(
        "clash" in d
        for d in flagging(judge(base, model_dir(tmp_path / "clash", clash)), "weight_similarity")
    )
    linked = model_dir(tmp_path / "linked", weights(0))
    (linked / "tokenizer.json").symlink_to(tmp_path / "elsewhere.json")
    assert flagging(judge(base, linked), "links")


def test_the_byte_cap_makes_the_verdict_incomplete(tmp_path):
    base = model_dir(tmp_path / "base", weights(0))
    verdict = judge(base, model_dir(tmp_path / "final", weights(0)), max_bytes=16)
    assert verdict.flagged is True and verdict.decided_by == "limit"
    assert verdict.incomplete[0].cap == "bytes" and verdict.justification.startswith("incomplete:")
