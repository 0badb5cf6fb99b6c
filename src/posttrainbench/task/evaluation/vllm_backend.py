"""vLLM offline batched generation (GPU task environments).

Same contract as the transformers backend: completion text only, cut at the first stop
string, greedy at temperature 0, seeded sampling otherwise. vLLM schedules all prompts
at once (continuous batching), so ``batch_size`` is accepted and ignored.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..benchmarks.base import GenerationSettings
from .backends import ModelLoadError, ProgressFn, StopFn, cut_at_stop

GPU_MEMORY_UTILIZATION_ENV = "PTB_VLLM_GPU_MEMORY_UTILIZATION"
MAX_MODEL_LEN_ENV = "PTB_VLLM_MAX_MODEL_LEN"


def sampling_kwargs(settings: GenerationSettings, seed: int) -> dict:
    """vLLM ``SamplingParams`` arguments for *settings* (kept separate to test without a GPU)."""
    greedy = settings.temperature <= 0
    return {
        "max_tokens": settings.max_new_tokens,
        "temperature": 0.0 if greedy else settings.temperature,
        "top_p": 1.0 if greedy else settings.top_p,
        "top_k": settings.top_k or -1,  # -1: off in every vLLM version
        "min_p": settings.min_p,
        "repetition_penalty": settings.repetition_penalty,
        "seed": seed,
        "stop": list(settings.stop) or None,
        "skip_special_tokens": True,
    }


class VllmBackend:
    """Offline ``vllm.LLM``; never runs code shipped in the model directory."""

    name = "vllm"

    def __init__(self, model_path: str, batch_size: int | None = None, dtype: str | None = None):
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ModelLoadError(
                f"backend 'vllm' needs the vllm package (GPU environments): {exc}"
            ) from exc
        kwargs: dict = {
            "model": model_path,
            "trust_remote_code": False,
            "dtype": dtype or "auto",
            "gpu_memory_utilization": float(os.environ.get(GPU_MEMORY_UTILIZATION_ENV, "0.85")),
            "enforce_eager": False,
        }
        if os.environ.get(MAX_MODEL_LEN_ENV):
            kwargs["max_model_len"] = int(os.environ[MAX_MODEL_LEN_ENV])
        try:
            self.llm = LLM(**kwargs)
        except Exception as exc:
            raise ModelLoadError(
                f"cannot load model from {model_path} with vLLM: {type(exc).__name__}: {exc}"
            ) from exc
        self.tokenizer = self.llm.get_tokenizer()

    def generate(
        self,
        prompts: Sequence[str],
        settings: GenerationSettings,
        seed: int = 0,
        stop_fn: StopFn | None = None,
        progress: ProgressFn | None = None,
    ) -> list[str]:
        """Completions of *prompts* in one batched call (*progress* hears of them all at its end)."""
        # stop_fn is a CPU-side speed-up for the transformers backend; vLLM's own
        # scheduling makes it unnecessary, and the verdicts never depend on it.
        from vllm import SamplingParams

        params = SamplingParams(**sampling_kwargs(settings, seed))
        # Token ids, not strings: the rendered chat template already holds BOS, and
        # vLLM would add another one (the transformers backend tokenizes the same way).
        token_prompts = [
            {"prompt_token_ids": self.tokenizer(p, add_special_tokens=False)["input_ids"]}
            for p in prompts
        ]
        outputs = self.llm.generate(token_prompts, params, use_tqdm=False)
        if progress is not None:
            progress(len(outputs))
        return [cut_at_stop(o.outputs[0].text, settings.stop) for o in outputs]
