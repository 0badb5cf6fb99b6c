"""Benchmarks and base models as typed data."""

from posttrainbench.host.catalog.registry import (
    BaseModelSpec,
    BenchmarkSpec,
    get_benchmark,
    get_model,
    list_benchmarks,
    list_models,
)

__all__ = [
    "BaseModelSpec",
    "BenchmarkSpec",
    "get_benchmark",
    "get_model",
    "list_benchmarks",
    "list_models",
]
