"""`ptb data prepare` / `ptb data import`: benchmark data and base models into the cache."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.core.errors import PtbError
from posttrainbench.host.data.manifest import DataManifest

app = typer.Typer(help="Benchmark data and base models for offline runs.", no_args_is_help=True)

CacheDir = typer.Option(
    None, "--cache-dir", help="Cache root (default: $PTB_CACHE_DIR or ~/.cache/posttrainbench)."
)


@app.command("prepare")
def prepare(
    benchmark: list[str] = typer.Option(
        ["all"],
        "-b",
        "--benchmark",
        metavar="ID",
        help="Benchmark id, or 'all'; repeatable, or comma-separated.",
    ),
    base_model: list[str] = typer.Option(
        [],
        "-M",
        "--base-model",
        metavar="ID",
        show_default=False,
        help="Base model id to fetch too, or 'all'; repeatable, or comma-separated.",
    ),
    cache_dir: Path | None = CacheDir,
    force: bool = typer.Option(False, "--force", help="Fetch again even if prepared."),
) -> None:
    """Download each benchmark's test data (and optionally base models) once, for air-gapped runs.

    Example: ptb data prepare -b gsm8k,bfcl -M smollm2-135m
    """
    from posttrainbench.host.catalog import get_benchmark, get_model, list_benchmarks, list_models
    from posttrainbench.host.data.prepare import (
        data_root,
        default_cache_dir,
        load_manifest,
        prepare_benchmark,
    )

    cache = cache_dir or default_cache_dir()
    benchmarks, models = ",".join(benchmark), ",".join(base_model)
    bench_ids = [b.id for b in list_benchmarks()] if benchmarks == "all" else _ids(benchmarks)
    model_ids = [m.id for m in list_models()] if models == "all" else _ids(models)
    for b in bench_ids:
        get_benchmark(b)  # validate every id before fetching anything
    specs = [get_model(m) for m in model_ids]
    console = Console()
    # Everything reachable is prepared; what failed is listed at the end, one line each
    # (one unreachable source must not stop the rest of an air-gap preparation).
    failed: list[str] = []
    for b in bench_ids:
        if force or load_manifest(b, cache) is None:
            console.print(f"{b}: fetching ...", highlight=False, soft_wrap=True)
        try:
            manifest = prepare_benchmark(b, cache, force=force)
        except (PtbError, OSError) as exc:
            failed.append(_failure(b, exc))
            continue
        console.print(_summary(manifest), highlight=False, soft_wrap=True)
        _warn_size(manifest)
    if specs:
        from posttrainbench.host.data.models import prepare_models

        for spec in specs:
            try:
                prepare_models([spec], cache, force=force, say=console.print)
            except (PtbError, OSError) as exc:
                failed.append(_failure(spec.id, exc))
    console.print(
        f"data: {data_root(cache)}"
        + (
            f"; models: {cache / 'models'} (set PTB_MODELS_DIR to it for task builds)"
            if specs
            else ""
        ),
        highlight=False,
        soft_wrap=True,
    )
    if failed:
        errors = Console(stderr=True)
        for line in failed:
            errors.print(f"failed: {escape(line)}", highlight=False, soft_wrap=True)
        total = len(bench_ids) + len(specs)
        raise PtbError(f"{len(failed)} of {total} could not be prepared (listed above)")


def _failure(name: str, exc: BaseException) -> str:
    """One line naming what failed and why (the reason may already start with the name)."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return reason if reason.startswith(f"{name}:") else f"{name}: {reason}"


@app.command("import")
def import_data(
    benchmark: str = typer.Argument(
        ..., metavar="BENCHMARK", help="Benchmark id (see `ptb list benchmarks`)."
    ),
    path: Path = typer.Argument(
        ...,
        help="A JSONL/JSON/CSV/Parquet file, a directory, or a Hugging Face dataset snapshot directory.",
    ),
    cache_dir: Path | None = CacheDir,
) -> None:
    """Import a benchmark's source files you already have into the cache, as `prepare` would store them.

    Example: ptb data import gsm8k ~/datasets/gsm8k/
    """
    from posttrainbench.host.data.importer import import_benchmark
    from posttrainbench.host.data.prepare import data_root, default_cache_dir

    cache = cache_dir or default_cache_dir()
    manifest = import_benchmark(benchmark, path, cache)
    console = Console()
    console.print(_summary(manifest), highlight=False, soft_wrap=True)
    _warn_size(manifest)
    console.print(f"data: {data_root(cache) / benchmark}", highlight=False, soft_wrap=True)


def _warn_size(manifest: DataManifest) -> None:
    from posttrainbench.host.data.prepare import size_warning

    line = size_warning(manifest)
    if line is not None:
        Console(stderr=True).print(f"warning: {escape(line)}", highlight=False, soft_wrap=True)


def _summary(manifest: DataManifest) -> str:
    sizes = ", ".join(f"{k} {v.n}" for k, v in sorted(manifest.splits.items()))
    return f"{manifest.benchmark}: {sizes} ({manifest.dev_source} dev) from {manifest.provenance}"


def _ids(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
