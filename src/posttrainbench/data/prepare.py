"""``ptb data prepare``: fetch each benchmark's public data once into a cache directory.

Layout: ``<cache>/data/<benchmark>/{test,dev}.jsonl`` + ``manifest.json`` and
``<cache>/raw/`` (downloaded files). A prepared benchmark is reused; the task compiler
reads from here, so an air-gapped cluster works after one ``prepare`` elsewhere.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import shutil
import tempfile
from pathlib import Path

from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.datafiles import read_split, write_split
from posttrainbench.benchmarks.fetch import Fetcher, FetchError
from posttrainbench.benchmarks.source import get_source
from posttrainbench.data.manifest import DataManifest, SplitInfo
from posttrainbench.errors import PtbError

CACHE_ENV = "PTB_CACHE_DIR"
DEV_FRACTION = 0.2
DEV_SEED = 20250101  # fixed: the carved dev split must be the same everywhere


class DataPrepareError(PtbError):
    """A benchmark's data could not be fetched or is malformed."""


def default_cache_dir() -> Path:
    """``$PTB_CACHE_DIR`` or ``~/.cache/posttrainbench``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "posttrainbench")


def data_root(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / "data"


def carve_dev(test: list[Sample], fraction: float = DEV_FRACTION) -> list[Sample]:
    """A seeded subset of *test* (in test order) held out as the dev split."""
    k = max(1, round(len(test) * fraction))
    chosen = set(random.Random(DEV_SEED).sample(range(len(test)), k))
    return [s for i, s in enumerate(test) if i in chosen]


def load_manifest(benchmark_id: str, cache_dir: Path | None = None) -> DataManifest | None:
    path = data_root(cache_dir) / benchmark_id / "manifest.json"
    return DataManifest.load(path) if path.is_file() else None


def prepare_benchmark(benchmark_id: str, cache_dir: Path | None = None, offline: bool = False,
                      force: bool = False) -> DataManifest:
    """Fetch and normalise one benchmark into the cache (idempotent); return its manifest."""
    cache_dir = cache_dir or default_cache_dir()
    existing = None if force else load_manifest(benchmark_id, cache_dir)
    if existing is not None:
        return existing
    source = get_source(benchmark_id)
    try:
        splits = source.fetch(Fetcher(cache_dir, offline=offline))
    except FetchError as exc:
        raise DataPrepareError(f"{benchmark_id}: {exc}") from None
    if not splits.get("test"):
        raise DataPrepareError(f"{benchmark_id}: source returned no test items")
    test_ids = {s.id for s in splits["test"]}
    if len(test_ids) != len(splits["test"]):
        raise DataPrepareError(f"{benchmark_id}: duplicate test ids")
    carved: list[str] = []
    if splits.get("dev"):
        if test_ids & {s.id for s in splits["dev"]}:
            raise DataPrepareError(f"{benchmark_id}: dev split overlaps the test split")
        dev_source = "natural"
    else:
        splits["dev"] = carve_dev(splits["test"])
        carved = [s.id for s in splits["dev"]]
        dev_source = "carved"
    final = data_root(cache_dir) / benchmark_id
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{benchmark_id}.", dir=final.parent))
    try:
        infos = {name: SplitInfo(n=len(rows), sha256=write_split(staging / f"{name}.jsonl", rows))
                 for name, rows in splits.items()}
        manifest = DataManifest(
            benchmark=benchmark_id, provenance=source.provenance,
            prepared_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            splits=infos, dev_source=dev_source, carved_dev_ids=carved,
        )
        manifest.dump(staging / "manifest.json")
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def task_splits(benchmark_id: str, feedback: str, cache_dir: Path | None = None) -> tuple[list[Sample], list[Sample] | None]:
    """(final test set, agent-visible split or None) for a task's feedback mode.

    ``test``: the agent sees the test set itself (PostTrainBench parity).
    ``dev``: the agent sees the dev split; with a carved dev split the final test set
    excludes those items, so the scored questions stay unseen.
    ``none``: the agent sees no data.
    """
    root = data_root(cache_dir)
    test = read_split(benchmark_id, "test", root)
    if feedback == "test":
        return test, test
    if feedback == "none":
        return test, None
    manifest = load_manifest(benchmark_id, cache_dir)
    dev = read_split(benchmark_id, "dev", root)
    if manifest is not None and manifest.carved_dev_ids:
        held = set(manifest.carved_dev_ids)
        test = [s for s in test if s.id not in held]
    return test, dev
