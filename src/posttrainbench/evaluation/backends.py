"""Generation backends: ``transformers`` (CPU or GPU, batched) and ``vllm`` (GPU).

A backend is any object with ``name`` and
``generate(prompts, settings, seed, stop_fn) -> list[str]``: the same inputs give the
same output format on every backend (completion text only, cut at the first stop
string). Factories are registered in ``_BACKENDS`` as import paths, so vLLM is only
imported where it is used; select one with ``--backend`` or ``PTB_EVAL_BACKEND``.
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Callable, Protocol, Sequence

from ..benchmarks.base import GenerationSettings

DEFAULT_BATCH_SIZE = 16


StopFn = Callable[[str], bool]  # partial completion -> stop this sequence now?


class GenerationBackend(Protocol):
    name: str

    def generate(
        self, prompts: Sequence[str], settings: GenerationSettings, seed: int = 0,
        stop_fn: StopFn | None = None,
    ) -> list[str]: ...


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """*text* up to the earliest stop string (exclusive)."""
    cut = len(text)
    for s in stop:
        i = text.find(s)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]


def _stopping_criteria(tokenizer, prompt_len: int, stop_fn: StopFn):
    """A transformers StoppingCriteria that ends each sequence once ``stop_fn`` holds."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Stop(StoppingCriteria):
        def __init__(self) -> None:
            self.done: torch.Tensor | None = None

        def __call__(self, input_ids, scores, **kwargs):
            if self.done is None:
                self.done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            for row in range(input_ids.shape[0]):
                if not self.done[row]:
                    text = tokenizer.decode(input_ids[row, prompt_len:], skip_special_tokens=True)
                    self.done[row] = bool(stop_fn(text))
            return self.done.clone()

    return StoppingCriteriaList([_Stop()])


class ModelLoadError(RuntimeError):
    """The model directory is missing or cannot be loaded."""


def configure_threads() -> int:
    """Use PTB_NUM_THREADS (default: all visible CPUs) torch threads; return the count."""
    import torch

    visible = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = int(os.environ.get("PTB_NUM_THREADS", "0") or 0) or visible
    torch.set_num_threads(n)
    return n


class TransformersBackend:
    """Batched greedy decoding with left padding; deterministic on CPU."""

    name = "transformers"

    def __init__(self, model_path: str, batch_size: int = DEFAULT_BATCH_SIZE, dtype: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        configure_threads()
        torch.manual_seed(0)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            # Never run code shipped inside a submitted model directory: the verifier
            # loads untrusted final_model/ contents.
            self.tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=False)
            kwargs = {"dtype": getattr(torch, dtype)} if dtype else {"dtype": "auto"}
            kwargs["trust_remote_code"] = False
            self.model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs).to(self.device)
        except Exception as exc:  # noqa: BLE001 - any failure here means "unloadable model"
            raise ModelLoadError(f"cannot load model from {model_path}: {type(exc).__name__}: {exc}") from exc
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = batch_size

    def generate(
        self, prompts: Sequence[str], settings: GenerationSettings, seed: int = 0,
        stop_fn: StopFn | None = None,
    ) -> list[str]:
        import torch

        max_new_tokens = settings.max_new_tokens
        sample = settings.temperature > 0
        if settings.stop:
            inner = stop_fn
            stop_fn = lambda text: any(s in text for s in settings.stop) or bool(inner and inner(text))  # noqa: E731
        torch.manual_seed(seed)

        # sort by length so each batch pads little; restore order at the end
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        outputs: list[str] = [""] * len(prompts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [prompts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False
            ).to(self.device)
            prompt_len = enc["input_ids"].shape[1]
            extra = {}
            if stop_fn is not None:
                extra["stopping_criteria"] = _stopping_criteria(self.tokenizer, prompt_len, stop_fn)
            with torch.inference_mode():
                out = self.model.generate(
                    **extra,
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=sample,
                    temperature=settings.temperature if sample else None,
                    top_p=settings.top_p if sample else None,
                    top_k=None,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = out[:, prompt_len:]
            for i, text in zip(idx, self.tokenizer.batch_decode(new, skip_special_tokens=True)):
                outputs[i] = cut_at_stop(text, settings.stop)
        return outputs


_BACKENDS: dict[str, str] = {
    "transformers": "posttrainbench.evaluation.backends:TransformersBackend",
    "vllm": "posttrainbench.evaluation.vllm_backend:VllmBackend",
}


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def make_backend(model_path: str, name: str | None = None, **kwargs) -> GenerationBackend:
    name = name or os.environ.get("PTB_EVAL_BACKEND", "transformers")
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(sorted(_BACKENDS))}")
    module_name, _, cls_name = _BACKENDS[name].partition(":")
    factory: Callable[..., GenerationBackend] = getattr(importlib.import_module(module_name), cls_name)
    t0 = time.perf_counter()
    backend = factory(model_path, **kwargs)
    backend.load_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    return backend
