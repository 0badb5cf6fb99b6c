"""`ptb eval` and `ptb baseline`: score a model directory or a base model on a benchmark."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from posttrainbench.cli.options import Benchmark, Model
from posttrainbench.errors import PtbError

Limit = typer.Option(None, "--limit", help="Score only the first N questions.")
Backend = typer.Option(
    None, "--backend", help="Generation backend: transformers (CPU/GPU) or vllm (GPU)."
)
Split = typer.Option("test", "--split", help="Data split: test or dev.")
Out = typer.Option(None, "-o", "--out", help="Write the metrics JSON here.")

CompletionsOut = typer.Option(
    None, "--completions-out", help="Also write each completion and its verdict here (JSONL)."
)


def _count_parser(flag: str):
    """A typer parser for a positive count. It raises PtbError, not click's BadParameter, so
    that any bad value (0, -4, "many") ends as the CLI's one unwrapped error line, exit 2."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise PtbError(f"invalid {flag} {text!r}: must be a positive integer")
        return value

    return parse


MaxNewTokens = typer.Option(
    None,
    "--max-new-tokens",
    parser=_count_parser("--max-new-tokens"),
    metavar="N",
    help="Cap each completion at N new tokens (default: the benchmark's own).",
)
BatchSize = typer.Option(
    None,
    "--batch-size",
    parser=_count_parser("--batch-size"),
    metavar="B",
    help="Sequences decoded at once per forward pass (default: the backend's).",
)


def _evaluate(
    benchmark: str,
    model_path: Path,
    limit: int | None,
    backend: str | None,
    split: str,
    out: Path | None,
    console: Console,
    max_new_tokens: int | None = None,
    batch_size: int | None = None,
    completions_out: Path | None = None,
) -> None:
    from posttrainbench.catalog import get_benchmark
    from posttrainbench.data.prepare import data_root, prepare_benchmark
    from posttrainbench.envs.eval_env import evaluation_python, run_module

    get_benchmark(benchmark)
    if split not in ("test", "dev"):
        raise PtbError(f"unknown split {split!r}; choose test or dev")
    prepare_benchmark(benchmark)
    args = ["--benchmark", benchmark, "--split", split, "--model-path", str(model_path)]
    for flag, value in (
        ("--limit", limit),
        ("--backend", backend),
        ("--json-out", out),
        ("--max-new-tokens", max_new_tokens),
        ("--batch-size", batch_size),
        ("--completions-out", completions_out),
    ):
        if value is not None:
            args += [flag, str(value)]
    code = run_module(
        evaluation_python(console.print),
        "posttrainbench.evaluation.evaluate",
        args,
        {"PTB_DATA_DIR": str(data_root())},
    )
    if code != 0:
        raise typer.Exit(code)


def eval_model(
    benchmark: str = Benchmark,
    model_path: Path = typer.Option(..., "--model-path", help="A transformers model directory."),
    limit: int | None = Limit,
    backend: str | None = Backend,
    split: str = Split,
    out: Path | None = Out,
    max_new_tokens: int | None = MaxNewTokens,
    batch_size: int | None = BatchSize,
    completions_out: Path | None = CompletionsOut,
) -> None:
    """Evaluate a model directory on a benchmark (the same code the verifier runs)."""
    from posttrainbench.catalog import get_benchmark

    get_benchmark(benchmark)
    if not (model_path / "config.json").is_file():
        raise PtbError(f"{model_path} is not a model directory (no config.json)")
    _evaluate(
        benchmark,
        model_path,
        limit,
        backend,
        split,
        out,
        Console(),
        max_new_tokens,
        batch_size,
        completions_out,
    )


def baseline(
    benchmark: str = Benchmark,
    model: str = Model,
    limit: int | None = Limit,
    backend: str | None = Backend,
    out: Path | None = Out,
    max_new_tokens: int | None = MaxNewTokens,
    batch_size: int | None = BatchSize,
) -> None:
    """Measure a base model's zero-shot score on a benchmark (model fetched into the cache)."""
    from posttrainbench.catalog import get_model
    from posttrainbench.data.prepare import default_cache_dir
    from posttrainbench.envs.eval_env import evaluation_python, run_module

    spec = get_model(model)
    console = Console()
    model_dir = default_cache_dir() / "models" / spec.id
    if not (model_dir / "config.json").is_file():
        code = run_module(
            evaluation_python(console.print),
            "posttrainbench.evaluation.prepare_model",
            ["--source", spec.source, "--out", str(model_dir)],
            {},
        )
        if code != 0:
            raise PtbError(f"preparing model {spec.id} from {spec.source} failed (exit {code})")
    _evaluate(
        benchmark, model_dir, limit, backend, "test", out, console, max_new_tokens, batch_size
    )
