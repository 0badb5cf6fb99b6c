"""Sandbox benchmark registry: ``get_benchmark(id)`` -> :class:`Benchmark`.

Entries are import paths so a benchmark's module loads only when asked for.
"""

from __future__ import annotations

import importlib

from .base import Benchmark, GenerationSettings, Sample, ScoreResult

_REGISTRY: dict[str, str] = {
    "bfcl": "posttrainbench.benchmarks.bfcl.benchmark:BfclSimplePython",
    "gsm8k": "posttrainbench.benchmarks.gsm8k.benchmark:Gsm8k",
    "aime2025": "posttrainbench.benchmarks.aime.benchmark:Aime2025",
    "gpqamain": "posttrainbench.benchmarks.gpqa.benchmark:GpqaMain",
    "humaneval": "posttrainbench.benchmarks.humaneval.benchmark:HumanEval",
    "arenahardwriting": "posttrainbench.benchmarks.arenahard.benchmark:ArenaHardWriting",
    "healthbench": "posttrainbench.benchmarks.healthbench.benchmark:HealthBench",
}


class UnknownBenchmarkError(KeyError):
    """Raised for a benchmark id that is not registered."""


def available_benchmarks() -> list[str]:
    return sorted(_REGISTRY)


def get_benchmark(benchmark_id: str) -> Benchmark:
    try:
        target = _REGISTRY[benchmark_id]
    except KeyError:
        raise UnknownBenchmarkError(
            f"unknown benchmark {benchmark_id!r}; known: {', '.join(available_benchmarks())}"
        ) from None
    module_name, _, cls_name = target.partition(":")
    return getattr(importlib.import_module(module_name), cls_name)()


__all__ = [
    "Benchmark",
    "GenerationSettings",
    "Sample",
    "ScoreResult",
    "UnknownBenchmarkError",
    "available_benchmarks",
    "get_benchmark",
]
