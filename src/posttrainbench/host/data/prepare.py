"""``ptb data prepare``: fetch each benchmark's public data once into a cache directory.

Layout: ``<cache>/data/<benchmark>/{test,dev}.jsonl`` + ``manifest.json`` and
``<cache>/raw/`` (downloaded files). A prepared benchmark is reused; the task compiler
reads from here, so an air-gapped cluster works after one ``prepare`` elsewhere, or after
``ptb data import`` of files brought in by hand (posttrainbench.host.data.importer). Both
routes end in :func:`store_benchmark`, so they write the same entry from the same files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from posttrainbench.core.errors import PtbError
from posttrainbench.host.data.manifest import DataManifest, SourceFileInfo, SplitInfo
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.datafiles import read_split, write_split
from posttrainbench.task.benchmarks.fetch import Fetcher, FetchError
from posttrainbench.task.benchmarks.rows import Row, check_columns, read_rows
from posttrainbench.task.benchmarks.source import DataSource, RawFile, definition_digest, get_source

CACHE_ENV = "PTB_CACHE_DIR"
DEV_FRACTION = 0.2
DEV_SEED = 20250101  # fixed: the carved dev split must be the same everywhere


class DataPrepareError(PtbError):
    """A benchmark's data could not be fetched or read, or is malformed."""


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


def prepare_benchmark(
    benchmark_id: str, cache_dir: Path | None = None, offline: bool = False, force: bool = False
) -> DataManifest:
    """Fetch and normalise one benchmark into the cache (idempotent); return its manifest."""
    cache_dir = cache_dir or default_cache_dir()
    existing = None if force else load_manifest(benchmark_id, cache_dir)
    if existing is not None and existing.definition == definition_digest(benchmark_id):
        return existing
    if existing is not None and existing.origin == "import":
        # Its files are the user's: they cannot be fetched again.
        raise DataPrepareError(
            f"{benchmark_id}: the cache entry imported from {existing.imported_from} was "
            f"built by another definition of the benchmark; run `ptb data import "
            f"{benchmark_id} PATH` again"
        )
    source = get_source(benchmark_id)
    try:
        raw = source.download(Fetcher(cache_dir, offline=offline))
    except FetchError as exc:
        raise DataPrepareError(f"{benchmark_id}: {exc}") from None
    return store_benchmark(
        source, {role: [f] for role, f in raw.items()}, cache_dir, provenance=source.provenance
    )


def store_benchmark(
    source: DataSource,
    raw: dict[str, list[RawFile]],
    cache_dir: Path,
    *,
    provenance: str,
    imported_from: Path | None = None,
) -> DataManifest:
    """Check *raw* against *source*'s columns, build its splits and write the cache entry.

    *raw* holds each of ``source.files`` by role (several files: shards, read in order).
    The one route from source files to a cache entry, for downloads and imports alike.
    Any problem is a DataPrepareError before anything is written; an existing entry is
    replaced only by a complete new one.
    """
    bid = source.benchmark_id
    try:
        rows, files = _read_sources(source, raw)
        splits = source.build(rows)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        # Rows that pass the column check can still be wrong inside (a field of the
        # wrong type, an answer without its marker): one line naming it, not a traceback.
        raise DataPrepareError(f"{bid}: {_reason(exc)}") from None
    dev_source, carved = _settle_dev(bid, splits)
    manifest = DataManifest(
        benchmark=bid,
        provenance=provenance,
        prepared_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        splits={},
        dev_source=dev_source,
        carved_dev_ids=carved,
        origin="download" if imported_from is None else "import",
        imported_from=None if imported_from is None else str(imported_from),
        source_files=files,
        definition=definition_digest(bid),
    )
    return _write_entry(data_root(cache_dir) / bid, splits, manifest)


def _read_sources(
    source: DataSource, raw: dict[str, list[RawFile]]
) -> tuple[dict[str, list[Row]], list[SourceFileInfo]]:
    """Each role's rows (checked for its columns) and what each file was."""
    rows: dict[str, list[Row]] = {}
    infos: list[SourceFileInfo] = []
    for spec in source.files:
        if not raw.get(spec.role):
            raise ValueError(f"no {spec.role} file ({spec.name})")
        rows[spec.role] = []
        for f in raw[spec.role]:
            got = read_rows(f.name, f.body, where=f.location)
            check_columns(got, spec.columns, f.location)
            rows[spec.role].extend(got)
            infos.append(
                SourceFileInfo(
                    role=spec.role,
                    location=f.location,
                    sha256=hashlib.sha256(f.body).hexdigest(),
                    rows=len(got),
                )
            )
    return rows, infos


def _settle_dev(benchmark_id: str, splits: dict[str, list[Sample]]) -> tuple[str, list[str]]:
    """Check the splits; carve a dev split when the source has none. (dev source, carved ids)."""
    if not splits.get("test"):
        raise DataPrepareError(f"{benchmark_id}: source returned no test items")
    test_ids = {s.id for s in splits["test"]}
    if len(test_ids) != len(splits["test"]):
        raise DataPrepareError(f"{benchmark_id}: duplicate test ids")
    if splits.get("dev"):
        if test_ids & {s.id for s in splits["dev"]}:
            raise DataPrepareError(f"{benchmark_id}: dev split overlaps the test split")
        # The same items under other ids (the test file given as the train file): a dev
        # split that is the test set would let feedback mode "dev" show the agent the test.
        test_items = {_content(s) for s in splits["test"]}
        shared = sum(1 for s in splits["dev"] if _content(s) in test_items)
        if shared:
            raise DataPrepareError(
                f"{benchmark_id}: {shared} of the {len(splits['dev'])} dev items are test items "
                "(the same content under other ids): give the published train file"
            )
        return "natural", []
    splits["dev"] = carve_dev(splits["test"])
    return "carved", [s.id for s in splits["dev"]]


def _content(sample: Sample) -> str:
    return json.dumps(sample.data, sort_keys=True, ensure_ascii=False)


def size_warning(manifest: DataManifest) -> str | None:
    """A line when the test split's size differs from the published one (a cut or padded
    file would give scores that do not compare with anyone's); None when it matches."""
    from posttrainbench.task.benchmarks.plugin import plugins

    published = plugins()[manifest.benchmark].published_test_items
    test = manifest.splits.get("test")
    if published is None or test is None or test.n == published:
        return None
    return (
        f"{manifest.benchmark}: the test split has {test.n} items, the published one "
        f"{published}; scores on it do not compare with published ones"
    )


def _write_entry(
    final: Path, splits: dict[str, list[Sample]], manifest: DataManifest
) -> DataManifest:
    """Write the splits and *manifest* in a staging directory, then rename it to *final*."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        infos = {
            name: SplitInfo(n=len(rows), sha256=write_split(staging / f"{name}.jsonl", rows))
            for name, rows in splits.items()
        }
        manifest = manifest.model_copy(update={"splits": infos})
        manifest.dump(staging / "manifest.json")
        _swap_in(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _swap_in(staging: Path, final: Path) -> None:
    """Replace *final* with *staging*; the old entry is moved aside, not deleted, until then."""
    old = final.with_name(f".{final.name}.old.{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)  # left by a crash of an earlier process with this pid
    if final.exists():
        os.replace(final, old)
    try:
        os.replace(staging, final)
    except OSError:
        if old.exists():
            os.replace(old, final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _reason(exc: BaseException) -> str:
    text = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
    return " ".join(text.split())


def task_splits(
    benchmark_id: str, feedback: str, cache_dir: Path | None = None
) -> tuple[list[Sample], list[Sample] | None]:
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
