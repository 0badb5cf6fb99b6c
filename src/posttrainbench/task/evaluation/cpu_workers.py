"""Data-parallel CPU generation: several worker processes, each with its own model copy.

A small model on CPU is bound by per-operation overhead, not arithmetic: two processes
with one thread each generate far more tokens per second than one process with two
threads. So on CPU, for models small enough to hold several copies, the transformers
backend shards the prompts over ``workers`` processes (``PTB_EVAL_WORKERS``, default
``auto``). Greedy outputs are the same as in one process (each prompt's tokens do not
depend on its batch neighbours); sampled outputs depend on the worker count, which is
deterministic for a given machine setting.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrainbench.core.weights import TRANSFORMERS_WEIGHT_SUFFIXES

from ..benchmarks.base import GenerationSettings
from .backends import (
    DEFAULT_BATCH_SIZE,
    ModelLoadError,
    ProgressFn,
    StopFn,
    TransformersBackend,
    visible_cpus,
)

WORKERS_ENV = "PTB_EVAL_WORKERS"
MAX_MODEL_BYTES_PER_WORKER = 2 << 30  # a larger model is not copied per worker
POLL_S = 0.5  # how often the parent reads the workers' answer count while it waits

_worker: dict[str, Any] = {}


def _init_worker(
    model_path: str, batch_size: int, dtype: str | None, threads: int, finished
) -> None:
    os.environ["PTB_NUM_THREADS"] = str(threads)
    _worker["finished"] = finished
    try:
        _worker["backend"] = TransformersBackend(model_path, batch_size, dtype)
    except Exception as exc:
        _worker["error"] = exc


def _generate_shard(
    prompts: list[str], settings: GenerationSettings, seed: int, stop_fn: StopFn | None
) -> list[str]:
    if "error" in _worker:
        raise _worker["error"]
    return _worker["backend"].generate(prompts, settings, seed, stop_fn, progress=_count_finished)


def _count_finished(n: int) -> None:
    """Add to the answer count shared with the parent (its live progress)."""
    finished = _worker["finished"]
    with finished.get_lock():
        finished.value += n


def _weights_bytes(model_path: str) -> int:
    return sum(
        p.stat().st_size
        for p in Path(model_path).glob("*")
        if p.suffix in TRANSFORMERS_WEIGHT_SUFFIXES
    )


def resolve_workers(model_path: str) -> int:
    """Worker processes to use: ``$PTB_EVAL_WORKERS``, or auto (one per CPU for small models on CPU)."""
    setting = os.environ.get(WORKERS_ENV, "auto").strip().lower()
    if setting != "auto":
        return max(1, int(setting))
    import torch

    if torch.cuda.is_available() or _weights_bytes(model_path) > MAX_MODEL_BYTES_PER_WORKER:
        return 1
    return max(1, min(visible_cpus(), 8))


class DataParallelBackend:
    """The transformers backend run in ``workers`` processes over shards of the prompts."""

    name = "transformers"

    def __init__(
        self,
        model_path: str,
        workers: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        dtype: str | None = None,
    ):
        from transformers import AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=False)
        except Exception as exc:
            raise ModelLoadError(
                f"cannot load model from {model_path}: {type(exc).__name__}: {exc}"
            ) from exc
        self.workers = workers
        # batch_size is per forward pass, as in one process: each worker runs batches of
        # that size, so up to workers x batch_size sequences are in flight (and in memory).
        self._initargs = (model_path, batch_size, dtype, max(1, visible_cpus() // workers))
        self._ctx = multiprocessing.get_context("spawn")  # no forked torch state
        self._finished = None  # answers the workers finished in the current call
        self._pool = None

    def _get_pool(self):
        if self._pool is None:
            self._finished = self._ctx.Value("q", 0)
            self._pool = self._ctx.Pool(
                self.workers, initializer=_init_worker, initargs=(*self._initargs, self._finished)
            )
        return self._pool

    def generate(
        self,
        prompts: Sequence[str],
        settings: GenerationSettings,
        seed: int = 0,
        stop_fn: StopFn | None = None,
        progress: ProgressFn | None = None,
    ) -> list[str]:
        """Completions of *prompts*, sharded over the workers; *progress* hears of answers as they finish."""
        progress = progress or (lambda n: None)
        # Deal prompts sorted by length round-robin, so every shard gets a similar mix.
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        shards = [order[w :: self.workers] for w in range(self.workers)]
        shards = [s for s in shards if s]
        try:
            pool = self._get_pool()
        except OSError as exc:  # no process-shared semaphores here (e.g. no /dev/shm)
            print(
                f"[eval] worker processes unavailable ({exc}); generating in this process",
                file=sys.stderr,
            )
            model_path, batch_size, dtype, _ = self._initargs
            return TransformersBackend(model_path, batch_size, dtype).generate(
                prompts, settings, seed, stop_fn, progress
            )
        self._finished.value = 0  # the workers are idle between calls
        pending = pool.starmap_async(
            _generate_shard, [([prompts[i] for i in s], settings, seed, stop_fn) for s in shards]
        )
        try:
            results = self._wait(pending, progress)
        except BaseException:
            # A failed, out-of-memory or timed-out attempt must not leave workers running.
            self.close()
            raise
        outputs = [""] * len(prompts)
        for shard, texts in zip(shards, results):
            for i, text in zip(shard, texts):
                outputs[i] = text
        return outputs

    def _wait(self, pending, progress: ProgressFn) -> list:
        """The shards' results; meanwhile, the workers' answer count goes to *progress*.

        Waiting in short steps also lets the attempt's time limit (a signal) interrupt it.
        """
        reported = 0
        while not pending.ready():
            pending.wait(POLL_S)
            now = self._finished.value
            if now > reported:
                progress(now - reported)
                reported = now
        results = pending.get()
        if len(_flatten(results)) > reported:
            progress(len(_flatten(results)) - reported)
        return results

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _flatten(results: list) -> list:
    return [text for shard in results for text in shard]


def transformers_backend(
    model_path: str, batch_size: int = DEFAULT_BATCH_SIZE, dtype: str | None = None
):
    """The ``transformers`` backend: data-parallel on CPU for small models, else one process."""
    workers = resolve_workers(model_path)
    if workers > 1:
        return DataParallelBackend(model_path, workers, batch_size, dtype)
    return TransformersBackend(model_path, batch_size, dtype)
