"""Sandbox benchmark registry: ``get_benchmark(id)`` -> :class:`Benchmark`.

The registry is the benchmark plugins (``plugin.py``); a benchmark's module loads only
when asked for. Importing this package needs only the standard library: the HumanEval
referee imports its execution module from here in a Python without pydantic.
"""

from __future__ import annotations

from .base import Benchmark, GenerationSettings, Sample, ScoreResult


class UnknownBenchmarkError(KeyError):
    """Raised for a benchmark id that is not registered."""


def available_benchmarks() -> list[str]:
    """The ids of every benchmark plugin, sorted."""
    from .plugin import plugins

    return list(plugins())


def get_benchmark(benchmark_id: str) -> Benchmark:
    """A fresh evaluator of *benchmark_id*."""
    from .plugin import plugins

    plugin = plugins().get(benchmark_id)
    if plugin is None:
        raise UnknownBenchmarkError(
            f"unknown benchmark {benchmark_id!r}; known: {', '.join(available_benchmarks())}"
        )
    benchmark: Benchmark = plugin.load("evaluator")()
    return benchmark


__all__ = [
    "Benchmark",
    "GenerationSettings",
    "Sample",
    "ScoreResult",
    "UnknownBenchmarkError",
    "available_benchmarks",
    "get_benchmark",
]
