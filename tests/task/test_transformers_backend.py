"""TransformersBackend's continuous-batching greedy loop gives model.generate's tokens.

Tiny random Llama and Qwen3 models with a small word-level tokenizer, built in the test
(no download). Each prompt's reference is plain ``model.generate`` on that prompt alone
(no padding); the backend runs them batched, with sequences leaving and joining the
running batch, and must give identical completions.
"""

from __future__ import annotations

import importlib.util

import pytest

MISSING = [
    m for m in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(m) is None
]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"needs the task-env ML stack; missing: {MISSING}"
)

WORDS = [f"w{i}" for i in range(60)]
PAD, EOS, BOS = 0, 1, 2


def _tokenizer(path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": PAD, "<eos>": EOS, "<bos>": BOS, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>"
    )
    fast.save_pretrained(path)


def _model(path, family: str):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    common = dict(
        vocab_size=len(WORDS) + 3,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        initializer_range=0.3,
    )
    cfg = LlamaConfig(**common) if family == "llama" else Qwen3Config(head_dim=8, **common)
    torch.manual_seed(1234)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # make EOS likely enough that sequences end at different steps
        model.lm_head.weight[EOS] *= 3.0
    model.save_pretrained(path)


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def model_dir(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    _tokenizer(path)
    _model(path, request.param)
    return path


def _prompts(n: int) -> list[str]:
    import random

    rng = random.Random(7)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def _reference(backend, prompts, max_new_tokens, stop_fn, stop):
    """Plain model.generate, one unpadded prompt at a time."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    from posttrainbench.task.evaluation.backends import cut_at_stop

    tok, out = backend.tokenizer, []

    class _Stop(StoppingCriteria):
        """Stops once the text after the prompt's ``prompt_len`` tokens meets ``stop_fn``."""

        def __init__(self, prompt_len: int) -> None:
            self.prompt_len = prompt_len

        def __call__(self, input_ids, scores, **kwargs):
            text = tok.decode(input_ids[0, self.prompt_len :], skip_special_tokens=True)
            return torch.tensor([bool(stop_fn and stop_fn(text))])

    for p in prompts:
        ids = tok(p, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            gen = backend.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=PAD,
                stopping_criteria=StoppingCriteriaList([_Stop(ids.shape[1])]),
            )
        out.append(cut_at_stop(tok.decode(gen[0, ids.shape[1] :], skip_special_tokens=True), stop))
    return out


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_greedy_equals_model_generate(model_dir, batch_size):
    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import TransformersBackend

    backend = TransformersBackend(str(model_dir), batch_size=batch_size, dtype="float32")
    prompts = _prompts(13)
    settings = GenerationSettings(max_new_tokens=24)
    ours = backend.generate(prompts, settings)
    ref = _reference(backend, prompts, 24, None, ())
    assert ours == ref
    lengths = {len(t.split()) for t in ours}
    assert len(lengths) > 2, "sequences should finish at different steps (exercises leave/join)"
    assert backend._generate_greedy(prompts, 24, None) is not None  # the fast loop really ran


def test_stop_fn_and_stop_strings_match(model_dir):
    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import TransformersBackend

    backend = TransformersBackend(str(model_dir), batch_size=4, dtype="float32")
    prompts = _prompts(9)
    stop_fn = lambda text: len(text.split()) >= 5 and "w1" in text  # noqa: E731
    settings = GenerationSettings(max_new_tokens=20, stop=("w3 ",))
    ours = backend.generate(prompts, settings, stop_fn=stop_fn)
    full_stop = lambda text: "w3 " in text or stop_fn(text)  # noqa: E731
    assert ours == _reference(backend, prompts, 20, full_stop, ("w3 ",))
    # and equal to the batched model.generate path it replaces
    assert ours == backend._generate_hf(prompts, settings, full_stop)


def test_zero_new_tokens_and_empty_input(model_dir):
    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import TransformersBackend

    backend = TransformersBackend(str(model_dir), batch_size=2, dtype="float32")
    assert backend.generate([], GenerationSettings(max_new_tokens=5)) == []
    assert backend.generate(["w1 w2", "w3"], GenerationSettings(max_new_tokens=0)) == ["", ""]


def test_logit_changing_generation_config_falls_back(model_dir):
    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import TransformersBackend

    backend = TransformersBackend(str(model_dir), batch_size=4, dtype="float32")
    backend.model.generation_config.repetition_penalty = 1.3
    assert not backend._greedy_loop_applies()
    prompts = _prompts(5)
    settings = GenerationSettings(max_new_tokens=12)
    assert backend.generate(prompts, settings) == backend._generate_hf(prompts, settings, None)
