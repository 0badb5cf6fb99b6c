"""The scored directory with the real SmolLM2-135M and transformers (issue 36, item 4).

An honest fine-tune's tokenizer (a pad token added, saved by transformers) passes the
check, and the staged directory loads and generates as the base does; a
``Replace``-chain decoder, which really does rewrite what the real tokenizer decodes
(the control), is rejected.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.task.test_disallowed_model import MISSING

pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"needs the task-env ML stack; missing: {', '.join(MISSING)}"
)


def _fine_tune(base, tmp_path):
    from transformers import AutoTokenizer

    final = tmp_path / "final_model"
    shutil.copytree(base, final)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
    tokenizer.save_pretrained(final)
    return final


def test_an_honest_pad_token_loads_and_generates(tmp_path, base):
    from transformers import AutoTokenizer

    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import TransformersBackend
    from posttrainbench.task.evaluation.model_files import check_model_files, stage_scored_model

    final = _fine_tune(base, tmp_path)
    verdict = check_model_files(final, base)
    assert not verdict.rejected, verdict.reason()
    scored = stage_scored_model(final, base, tmp_path / "scored")
    staged, original = AutoTokenizer.from_pretrained(scored), AutoTokenizer.from_pretrained(base)
    assert staged.pad_token == "<|pad|>"
    ids = original("get_weather(city='Paris')")["input_ids"]
    assert staged.decode(ids) == original.decode(ids)

    # The staged directory loads as a model and decodes as the base does (same weights).
    backend, reference = TransformersBackend(str(scored)), TransformersBackend(str(base))
    settings = GenerationSettings(max_new_tokens=8, temperature=0.0)
    prompt = ["<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"]
    assert backend.generate(prompt, settings) == reference.generate(prompt, settings)


def test_a_replace_chain_decoder_rewrites_for_real_and_is_rejected(tmp_path, base):
    from transformers import AutoTokenizer

    from posttrainbench.task.evaluation.model_files import check_model_files

    final = tmp_path / "final_model"
    shutil.copytree(base, final)
    data = json.loads((final / "tokenizer.json").read_text())
    data["decoder"] = {
        "type": "Sequence",
        "decoders": [
            data["decoder"],
            {"type": "Replace", "pattern": {"String": "London"}, "content": "Paris"},
        ],
    }
    (final / "tokenizer.json").write_text(json.dumps(data))
    ids = AutoTokenizer.from_pretrained(base)("London")["input_ids"]
    assert AutoTokenizer.from_pretrained(final).decode(ids) == "Paris"  # the attack works
    verdict = check_model_files(final, base)
    assert [(r.file, r.field) for r in verdict.rejections] == [("tokenizer.json", "decoder")]
