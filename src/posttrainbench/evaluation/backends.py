"""Generation backends. Only ``transformers`` (CPU/GPU, batched greedy) is implemented.

Extension point: a backend is any object with ``name`` and
``generate(prompts, max_new_tokens) -> list[str]``; register a factory in ``_BACKENDS``
(e.g. ``"vllm"`` for GPU sandboxes) and select it with ``--backend`` or ``PTB_EVAL_BACKEND``.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Protocol, Sequence

DEFAULT_BATCH_SIZE = 16


StopFn = Callable[[str], bool]  # partial completion -> stop this sequence now?


class GenerationBackend(Protocol):
    name: str

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, stop_fn: StopFn | None = None
    ) -> list[str]: ...


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
        self, prompts: Sequence[str], max_new_tokens: int, stop_fn: StopFn | None = None
    ) -> list[str]:
        import torch

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
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = out[:, prompt_len:]
            for i, text in zip(idx, self.tokenizer.batch_decode(new, skip_special_tokens=True)):
                outputs[i] = text
        return outputs


_BACKENDS: dict[str, Callable[..., GenerationBackend]] = {
    "transformers": TransformersBackend,
    # "vllm": VllmBackend,  # GPU sandboxes; not implemented yet
}


def make_backend(model_path: str, name: str | None = None, **kwargs) -> GenerationBackend:
    name = name or os.environ.get("PTB_EVAL_BACKEND", "transformers")
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(sorted(_BACKENDS))}")
    t0 = time.perf_counter()
    backend = _BACKENDS[name](model_path, **kwargs)
    backend.load_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    return backend
