"""A cache entry prepared by another definition of a benchmark is not reused.

Split files built by an older definition (other fields, another order, other items)
would otherwise reach a new verifier: BFCL's old `simple_python` rows have no `tools`,
and the verifier crashed on them (`KeyError: 'tools'`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.host.data.manifest import DataManifest
from posttrainbench.host.data.prepare import DataPrepareError, data_root, prepare_benchmark
from posttrainbench.task.benchmarks.source import definition_digest


def _age(cache: Path, benchmark: str, **update: object) -> None:
    """Make the entry look as an older version wrote it."""
    path = data_root(cache) / benchmark / "manifest.json"
    manifest = DataManifest.load(path).model_copy(update={"definition": None, **update})
    manifest.dump(path)
    (data_root(cache) / benchmark / "test.jsonl").write_text(json.dumps({"id": "old"}) + "\n")


def test_a_stale_entry_is_prepared_again(tmp_path: Path) -> None:
    first = prepare_benchmark("healthbench", tmp_path, offline=True)  # shipped: offline
    assert first.definition == definition_digest("healthbench")
    _age(tmp_path, "healthbench")
    again = prepare_benchmark("healthbench", tmp_path, offline=True)
    assert again.definition == definition_digest("healthbench")
    rows = (data_root(tmp_path) / "healthbench" / "test.jsonl").read_text().splitlines()
    assert len(rows) == first.splits["test"].n and '"old"' not in rows[0]


def test_a_current_entry_is_reused(tmp_path: Path) -> None:
    first = prepare_benchmark("healthbench", tmp_path, offline=True)
    assert prepare_benchmark("healthbench", tmp_path, offline=True).prepared_at == first.prepared_at


def test_a_stale_import_asks_for_the_import_again(tmp_path: Path) -> None:
    prepare_benchmark("healthbench", tmp_path, offline=True)
    _age(tmp_path, "healthbench", origin="import", imported_from="/data/hb.jsonl")
    with pytest.raises(DataPrepareError, match=r"ptb data import healthbench PATH"):
        prepare_benchmark("healthbench", tmp_path, offline=True)


def test_the_digest_follows_the_benchmark_s_own_files() -> None:
    assert definition_digest("gsm8k") != definition_digest("bfcl")
    assert definition_digest("gsm8k") == definition_digest("gsm8k")
