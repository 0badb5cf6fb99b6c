"""Where a benchmark's data comes from: one :class:`DataSource` per benchmark.

``fetch`` downloads the public source through a :class:`Fetcher` and returns the
normalised splits. ``test`` is required. ``dev``, when the benchmark has a natural
held-out split disjoint from the test set, is returned too; otherwise the preparer
carves a seeded dev subset out of the test set (see posttrainbench.data.prepare).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod

from .base import Sample
from .fetch import Fetcher

_SOURCES: dict[str, str] = {
    "bfcl": "posttrainbench.benchmarks.bfcl.source:BfclSource",
    "gsm8k": "posttrainbench.benchmarks.gsm8k.source:Gsm8kSource",
    "aime2025": "posttrainbench.benchmarks.aime.source:Aime2025Source",
    "gpqamain": "posttrainbench.benchmarks.gpqa.source:GpqaMainSource",
    "humaneval": "posttrainbench.benchmarks.humaneval.source:HumanEvalSource",
    "arenahardwriting": "posttrainbench.benchmarks.arenahard.source:ArenaHardWritingSource",
    "healthbench": "posttrainbench.benchmarks.healthbench.source:HealthBenchSource",
}


class DataSource(ABC):
    """Downloads and normalises one benchmark's public data."""

    benchmark_id: str
    # Human-readable provenance recorded in the data manifest (URL, package==version).
    provenance: str

    @abstractmethod
    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        """Splits by name (``test`` required, ``dev`` optional), each in a fixed order."""


def get_source(benchmark_id: str) -> DataSource:
    """The data source of *benchmark_id* (KeyError if there is none)."""
    module_name, _, cls_name = _SOURCES[benchmark_id].partition(":")
    return getattr(importlib.import_module(module_name), cls_name)()
