"""Evaluate one model directory on one benchmark -> :class:`Metrics`."""

from __future__ import annotations

import hashlib
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from ..benchmarks import Benchmark, Sample
from ..schemas import Metrics

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def model_fingerprint(model_path: str | Path, full_hash_limit_bytes: int = 1 << 30) -> str:
    """sha256 over config + weight files: full content when small, else names and sizes."""
    root = Path(model_path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    weights = [p for p in files if p.suffix in _WEIGHT_SUFFIXES]
    full = sum(p.stat().st_size for p in weights) <= full_hash_limit_bytes
    h = hashlib.sha256()
    for p in files:
        rel = p.relative_to(root).as_posix()
        if p.name == "config.json" or (full and p in weights):
            h.update(rel.encode())
            with p.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        elif p in weights:
            h.update(f"{rel}:{p.stat().st_size}".encode())
    return h.hexdigest()


def stderr_of(accuracy: float, n: int) -> float:
    return math.sqrt(accuracy * (1 - accuracy) / (n - 1)) if n > 1 else 0.0


def evaluate_model(
    benchmark: Benchmark,
    samples: Sequence[Sample],
    model_path: str,
    backend_name: str | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    early_stop: bool = True,
    completions_out: list | None = None,
) -> Metrics:
    """Generate and score every sample. Raises ModelLoadError if the model can't load."""
    from .backends import DEFAULT_BATCH_SIZE, make_backend

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    backend = make_backend(model_path, backend_name, batch_size=batch_size or DEFAULT_BATCH_SIZE)
    timings["load_s"] = round(time.perf_counter() - t0, 2)
    tokenizer = getattr(backend, "tokenizer", None)
    prompts = [benchmark.build_prompt(s, tokenizer) for s in samples]
    t1 = time.perf_counter()
    completions = backend.generate(
        prompts,
        benchmark.generation,
        seed,
        stop_fn=benchmark.cannot_succeed if early_stop else None,
    )
    timings["generate_s"] = round(time.perf_counter() - t1, 2)
    scores = benchmark.score_batch(samples, completions)
    by_cat: dict[str, list[float]] = defaultdict(list)
    for s, r in zip(samples, scores):
        by_cat[s.category].append(r.score)
    if completions_out is not None:
        completions_out.extend(
            {"id": s.id, "completion": c, "score": r.score, "error_type": r.error_type, "detail": r.detail}
            for s, c, r in zip(samples, completions, scores)
        )
    n = len(samples)
    total = sum(r.score for r in scores)
    acc = total / n if n else 0.0
    timings["total_s"] = round(time.perf_counter() - t0, 2)
    return Metrics(
        benchmark=benchmark.id,
        model_path=str(model_path),
        accuracy=acc,
        stderr=stderr_of(acc, n),
        n=n,
        n_correct=sum(1 for r in scores if r.correct),
        per_category={k: sum(v) / len(v) for k, v in by_cat.items()},
        backend=backend.name,
        data_sha256=benchmark.data_sha256(samples),
        model_sha256=model_fingerprint(model_path),
        seed=seed,
        timings=timings,
    )
