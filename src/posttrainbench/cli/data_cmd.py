"""`ptb data prepare` / `ptb data import`: benchmark data and base models into the cache."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from posttrainbench.data.manifest import DataManifest

app = typer.Typer(help="Benchmark data and base models for offline runs.", no_args_is_help=True)

CacheDir = typer.Option(
    None, "--cache-dir", help="Cache root (default: $PTB_CACHE_DIR or ~/.cache/posttrainbench)."
)


@app.command("prepare")
def prepare(
    benchmarks: str = typer.Option(
        "all", "--benchmarks", "-b", help="Comma-separated benchmark ids, or 'all'."
    ),
    models: str = typer.Option(
        "", "--models", "-m", help="Comma-separated base model ids to fetch too, or 'all'."
    ),
    cache_dir: Path | None = CacheDir,
    force: bool = typer.Option(False, "--force", help="Fetch again even if prepared."),
) -> None:
    """Download each benchmark's test data (and optionally base models) once, for air-gapped runs."""
    from posttrainbench.catalog import get_benchmark, get_model, list_benchmarks, list_models
    from posttrainbench.data.prepare import data_root, default_cache_dir, prepare_benchmark

    cache = cache_dir or default_cache_dir()
    bench_ids = [b.id for b in list_benchmarks()] if benchmarks == "all" else _ids(benchmarks)
    model_ids = [m.id for m in list_models()] if models == "all" else _ids(models)
    for b in bench_ids:
        get_benchmark(b)  # validate every id before fetching anything
    specs = [get_model(m) for m in model_ids]
    console = Console()
    for b in bench_ids:
        console.print(
            _summary(prepare_benchmark(b, cache, force=force)), highlight=False, soft_wrap=True
        )
    if specs:
        from posttrainbench.data.models import prepare_models

        prepare_models(specs, cache, force=force, say=console.print)
    console.print(
        f"data: {data_root(cache)}"
        + (
            f"; models: {cache / 'models'} (set PTB_MODELS_DIR to it for task builds)"
            if specs
            else ""
        )
    )


@app.command("import")
def import_data(
    benchmark: str = typer.Argument(..., help="Benchmark id (see `ptb list benchmarks`)."),
    path: Path = typer.Argument(
        ...,
        help="A JSONL/JSON/CSV/Parquet file, a directory, or a Hugging Face dataset snapshot directory.",
    ),
    cache_dir: Path | None = CacheDir,
) -> None:
    """Import a benchmark's source files you already have into the cache, as `prepare` would store them."""
    from posttrainbench.data.importer import import_benchmark
    from posttrainbench.data.prepare import data_root, default_cache_dir

    cache = cache_dir or default_cache_dir()
    manifest = import_benchmark(benchmark, path, cache)
    console = Console()
    console.print(_summary(manifest), highlight=False, soft_wrap=True)
    console.print(f"data: {data_root(cache) / benchmark}", highlight=False, soft_wrap=True)


def _summary(manifest: DataManifest) -> str:
    sizes = ", ".join(f"{k} {v.n}" for k, v in sorted(manifest.splits.items()))
    return f"{manifest.benchmark}: {sizes} ({manifest.dev_source} dev) from {manifest.provenance}"


def _ids(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
