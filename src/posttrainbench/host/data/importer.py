"""``ptb data import``: a benchmark's source files you already have, into the cache.

For air-gapped machines. PATH is the one file of a single-file benchmark, or a directory
holding the files ``ptb data prepare`` would download, in their published layout, flat,
or as a Hugging Face dataset snapshot (its Parquet shards). They go through the same
checks and conversion as a download (:func:`posttrainbench.host.data.prepare.store_benchmark`),
so the entry is the one ``prepare`` writes, with each file's path and sha256 in its manifest.
"""

from __future__ import annotations

from pathlib import Path

from posttrainbench.host.data.manifest import DataManifest
from posttrainbench.host.data.prepare import DataPrepareError, default_cache_dir, store_benchmark
from posttrainbench.task.benchmarks.source import DataSource, RawFile, SourceFile, get_source


def import_benchmark(benchmark_id: str, path: Path, cache_dir: Path | None = None) -> DataManifest:
    """Read *benchmark_id*'s source files from *path* (a file or a directory) into the cache.

    Replaces an existing entry only when every file reads and checks; otherwise raises
    DataPrepareError (one line) and leaves the cache as it was.
    """
    from posttrainbench.host.catalog import get_benchmark

    get_benchmark(benchmark_id)  # an unknown id fails with the catalog's own message
    source = get_source(benchmark_id)
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise DataPrepareError(f"{benchmark_id}: no such file or directory: {path}")
    found = _locate_in_dir(source, path) if path.is_dir() else _locate_file(source, path)
    raw = {role: [_read(p) for p in paths] for role, paths in found.items()}
    return store_benchmark(
        source,
        raw,
        cache_dir or default_cache_dir(),
        provenance=f"{path} (imported)",
        imported_from=path,
    )


def _locate_file(source: DataSource, path: Path) -> dict[str, list[Path]]:
    """A lone file is the whole source of a single-file benchmark, whatever its name."""
    if len(source.files) == 1:
        return {source.files[0].role: [path]}
    names = ", ".join(Path(f.name).name for f in source.files)
    raise DataPrepareError(
        f"{source.benchmark_id} is built from {len(source.files)} files ({names}); "
        f"give a directory that holds them, not {path}"
    )


def _locate_in_dir(source: DataSource, root: Path) -> dict[str, list[Path]]:
    """Each of the source's files under *root*: the first of its layouts that exists."""
    found: dict[str, list[Path]] = {}
    for spec in source.files:
        hits = _find(root, spec)
        if not hits:
            raise DataPrepareError(
                f"{source.benchmark_id}: no {spec.role} file under {root} "
                f"(looked for {', '.join(spec.globs)})"
            )
        found[spec.role] = hits
    return found


def _find(root: Path, spec: SourceFile) -> list[Path]:
    # A wildcard layout matches a snapshot's shards (test-00000-of-00002.parquet, ...),
    # which sort into their order.
    for pattern in spec.globs:
        hits = sorted(p for p in root.glob(pattern) if p.is_file())
        if hits:
            return hits
    return []


def _read(path: Path) -> RawFile:
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise DataPrepareError(f"cannot read {path}: {exc.strerror or exc}") from None
    return RawFile(path.name, str(path), body)
