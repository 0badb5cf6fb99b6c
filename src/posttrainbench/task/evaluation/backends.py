"""Generation backends: ``transformers`` (CPU or GPU, batched) and ``vllm`` (GPU).

A backend is any object with ``name`` and
``generate(prompts, settings, seed, stop_fn) -> list[str]``: the same inputs give the
same output format on every backend (completion text only, cut at the first stop
string). A backend may also take ``progress``, called with the number of answers just
finished, for live progress. Factories are registered in ``_BACKENDS`` as import paths,
so vLLM is only imported where it is used; select one with ``--backend`` or
``PTB_EVAL_BACKEND``.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from ..benchmarks.base import GenerationSettings

DEFAULT_BATCH_SIZE = 16


StopFn = Callable[[str], bool]  # partial completion -> stop this sequence now?
ProgressFn = Callable[[int], None]  # called with the number of answers just finished


class GenerationBackend(Protocol):
    name: str

    def generate(
        self,
        prompts: Sequence[str],
        settings: GenerationSettings,
        seed: int = 0,
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
                self.done = torch.zeros(
                    input_ids.shape[0], dtype=torch.bool, device=input_ids.device
                )
            for row in range(input_ids.shape[0]):
                if not self.done[row]:
                    text = tokenizer.decode(input_ids[row, prompt_len:], skip_special_tokens=True)
                    self.done[row] = bool(stop_fn(text))
            return self.done.clone()

    return StoppingCriteriaList([_Stop()])


def _no_progress(questions: int) -> None:
    """Progress reported nowhere."""


class ModelLoadError(RuntimeError):
    """The model directory is missing or cannot be loaded."""


def visible_cpus() -> int:
    """CPUs this process may run on."""
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def configure_threads() -> int:
    """Use PTB_NUM_THREADS (default: all visible CPUs) torch threads; return the count."""
    import torch

    n = int(os.environ.get("PTB_NUM_THREADS", "0") or 0) or visible_cpus()
    torch.set_num_threads(n)
    return n


# Generation-config fields that change greedy logits; a model that sets any of them is
# decoded by model.generate itself so that its output stays exactly what HF would give.
_LOGIT_OPTIONS_NEUTRAL: dict[str, tuple] = {
    "repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "bad_words_ids": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "sequence_bias": (None,),
    "exponential_decay_length_penalty": (None,),
}


class _Row:
    """One prompt being decoded: its index in the caller's list and the tokens so far."""

    __slots__ = ("index", "tokens")

    def __init__(self, index: int) -> None:
        self.index = index
        self.tokens: list[int] = []


class TransformersBackend:
    """Batched decoding with left padding; deterministic on CPU.

    Greedy requests use a continuous-batching loop (``_generate_greedy``): a finished
    sequence leaves the running batch at once (its KV-cache row is dropped) and a waiting
    prompt takes its slot, so no step is spent on padding rows. The tokens are the ones
    ``model.generate`` picks for each prompt; sampling, models with logit-changing
    generation options and caches that are not plain per-layer key/value tensors use
    ``model.generate`` directly.
    """

    name = "transformers"

    def __init__(
        self, model_path: str, batch_size: int = DEFAULT_BATCH_SIZE, dtype: str | None = None
    ):
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
        except Exception as exc:
            raise ModelLoadError(
                f"cannot load model from {model_path}: {type(exc).__name__}: {exc}"
            ) from exc
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = batch_size

    def generate(
        self,
        prompts: Sequence[str],
        settings: GenerationSettings,
        seed: int = 0,
        stop_fn: StopFn | None = None,
        progress: ProgressFn | None = None,
    ) -> list[str]:
        """Completions of *prompts*; *progress* hears of each answer as it finishes."""
        import torch

        if settings.stop:
            inner, stops = stop_fn, settings.stop

            def stop_or_inner(text: str) -> bool:
                return any(s in text for s in stops) or bool(inner and inner(text))

            stop_fn = stop_or_inner
        torch.manual_seed(seed)
        if (
            settings.temperature <= 0
            and settings.repetition_penalty == 1.0
            and self._greedy_loop_applies()
        ):
            texts = self._generate_greedy(prompts, settings.max_new_tokens, stop_fn, progress)
            if texts is not None:
                return [cut_at_stop(t, settings.stop) for t in texts]
        return self._generate_hf(prompts, settings, stop_fn, progress)

    # -- model.generate, batch by batch (sampling and the fallback) --------------------

    def _generate_hf(
        self,
        prompts: Sequence[str],
        settings: GenerationSettings,
        stop_fn: StopFn | None,
        progress: ProgressFn | None = None,
    ) -> list[str]:
        import torch

        progress = progress or _no_progress
        sample = settings.temperature > 0
        # sort by length so each batch pads little; restore order at the end
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        outputs: list[str] = [""] * len(prompts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [prompts[i] for i in idx],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            ).to(self.device)
            prompt_len = enc["input_ids"].shape[1]
            extra = {}
            if stop_fn is not None:
                extra["stopping_criteria"] = _stopping_criteria(self.tokenizer, prompt_len, stop_fn)
            with torch.inference_mode():
                out = self.model.generate(
                    **extra,
                    **enc,
                    max_new_tokens=settings.max_new_tokens,
                    do_sample=sample,
                    temperature=settings.temperature if sample else None,
                    top_p=settings.top_p if sample else None,
                    # 0 turns top-k off (vLLM's default), where the model's config could
                    # otherwise add transformers' 50.
                    top_k=settings.top_k if sample else None,
                    min_p=settings.min_p if sample and settings.min_p > 0 else None,
                    repetition_penalty=settings.repetition_penalty,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = out[:, prompt_len:]
            for i, text in zip(idx, self.tokenizer.batch_decode(new, skip_special_tokens=True)):
                outputs[i] = cut_at_stop(text, settings.stop)
            progress(len(idx))
        return outputs

    # -- greedy continuous batching ----------------------------------------------------

    def _greedy_loop_applies(self) -> bool:
        """True when the model's generation config leaves greedy logits untouched."""
        cfg = getattr(self.model, "generation_config", None)
        if cfg is None:
            return True
        return all(getattr(cfg, k, None) in ok for k, ok in _LOGIT_OPTIONS_NEUTRAL.items())

    def _eos_ids(self) -> set[int]:
        """The token ids that end a sequence, as model.generate reads them."""
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}

    def _prefill(self, ids: list[list[int]]):
        """Run the prompts (left-padded together); return (cache, mask, next-token logits)."""
        import torch
        from transformers import DynamicCache

        width = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=self.device)
        mask = torch.tensor(
            [[0] * (width - len(x)) + [1] * len(x) for x in ids], device=self.device
        )
        # positions as model.generate derives them from the attention mask
        position_ids = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
        cache = DynamicCache(config=self.model.config)
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg(): cache},
        )
        return cache, mask, out.logits[:, -1, :]

    def _cache_kwarg(self) -> str:
        """The forward() keyword for the KV cache (``cache`` in newer transformers)."""
        import inspect

        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"

    @staticmethod
    def _plain_layers(cache) -> bool:
        """True when every cache layer is a full (non-sliding) key/value pair we can edit."""
        layers = getattr(cache, "layers", None)
        return bool(layers) and all(
            type(layer).__name__ == "DynamicLayer" and getattr(layer, "keys", None) is not None
            for layer in layers
        )

    @staticmethod
    def _left_pad(t, width: int, dim: int):
        """Zero-pad tensor *t* on the left of *dim* to *width*."""
        import torch

        missing = width - t.shape[dim]
        if missing <= 0:
            return t
        shape = list(t.shape)
        shape[dim] = missing
        return torch.cat([t.new_zeros(shape), t], dim=dim)

    def _merge(self, cache, mask, new_cache, new_mask):
        """Append the rows of (new_cache, new_mask) to (cache, mask), aligning on the right."""
        import torch

        width = max(mask.shape[1], new_mask.shape[1])
        for layer, new in zip(cache.layers, new_cache.layers):
            layer.keys = torch.cat(
                [self._left_pad(layer.keys, width, 2), self._left_pad(new.keys, width, 2)]
            )
            layer.values = torch.cat(
                [self._left_pad(layer.values, width, 2), self._left_pad(new.values, width, 2)]
            )
        return torch.cat([self._left_pad(mask, width, 1), self._left_pad(new_mask, width, 1)])

    @staticmethod
    def _keep(cache, mask, keep: list[int]):
        """Only rows *keep*; drop left columns that are padding for all of them."""
        import torch

        rows = torch.tensor(keep, device=mask.device)
        mask = mask.index_select(0, rows)
        first = int(mask.any(0).nonzero()[0]) if mask.any() else 0
        mask = mask[:, first:]
        for layer in cache.layers:
            layer.keys = layer.keys.index_select(0, rows)[:, :, first:]
            layer.values = layer.values.index_select(0, rows)[:, :, first:]
        return mask

    def _generate_greedy(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop_fn: StopFn | None,
        progress: ProgressFn | None = None,
    ) -> list[str] | None:
        """Greedy decoding with at most ``batch_size`` running sequences; None to fall back.

        Falling back happens at the first prefill, before any answer is reported to *progress*.
        """
        import torch

        progress = progress or _no_progress
        tok = self.tokenizer
        ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        queue = sorted(
            range(len(prompts)), key=lambda i: len(ids[i])
        )  # short first: little padding
        queue.reverse()  # pop() takes the shortest
        eos = self._eos_ids()
        cache_kw = self._cache_kwarg()
        done: list[list[int] | None] = [None] * len(prompts)
        rows: list[_Row] = []
        cache = mask = None
        logits = None
        with torch.inference_mode():
            while queue or rows:
                if queue and len(rows) < self.batch_size and max_new_tokens > 0:
                    take = [
                        queue.pop() for _ in range(min(self.batch_size - len(rows), len(queue)))
                    ]
                    new_cache, new_mask, new_logits = self._prefill([ids[i] for i in take])
                    if not self._plain_layers(new_cache):
                        return None
                    if rows:
                        mask = self._merge(cache, mask, new_cache, new_mask)
                        logits = torch.cat([logits, new_logits])
                    else:
                        cache, mask, logits = new_cache, new_mask, new_logits
                    rows.extend(_Row(i) for i in take)
                elif max_new_tokens <= 0:
                    for i in queue:
                        done[i] = []
                    progress(len(queue))
                    break
                next_tokens = logits.argmax(-1).tolist()
                keep: list[int] = []
                for r, (row, token) in enumerate(zip(rows, next_tokens)):
                    row.tokens.append(token)
                    finished = token in eos or len(row.tokens) >= max_new_tokens
                    if not finished and stop_fn is not None:
                        finished = bool(stop_fn(tok.decode(row.tokens, skip_special_tokens=True)))
                    if finished:
                        done[row.index] = row.tokens
                    else:
                        keep.append(r)
                if len(keep) < len(rows):
                    progress(len(rows) - len(keep))
                if len(keep) < len(rows):
                    rows = [rows[r] for r in keep]
                    if not rows:
                        cache = mask = logits = None
                        continue
                    mask = self._keep(cache, mask, keep)
                    next_tokens = [next_tokens[r] for r in keep]
                # one decode step for every running row
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
                position_ids = mask.sum(-1, keepdim=True) - 1
                # the cache object is updated in place
                out = self.model(
                    input_ids=torch.tensor(next_tokens, device=self.device)[:, None],
                    attention_mask=mask,
                    position_ids=position_ids,
                    use_cache=True,
                    logits_to_keep=1,
                    **{cache_kw: cache},
                )
                logits = out.logits[:, -1, :]
        return [tok.decode(t or [], skip_special_tokens=True) for t in done]


_BACKENDS: dict[str, str] = {
    "transformers": "posttrainbench.task.evaluation.cpu_workers:transformers_backend",
    "vllm": "posttrainbench.task.evaluation.vllm_backend:VllmBackend",
}


def make_backend(model_path: str, name: str | None = None, **kwargs) -> GenerationBackend:
    name = name or os.environ.get("PTB_EVAL_BACKEND", "transformers")
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(sorted(_BACKENDS))}")
    module_name, _, cls_name = _BACKENDS[name].partition(":")
    factory: Callable[..., GenerationBackend] = getattr(
        importlib.import_module(module_name), cls_name
    )
    t0 = time.perf_counter()
    backend = factory(model_path, **kwargs)
    backend.load_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    return backend
