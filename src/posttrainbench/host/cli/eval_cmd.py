"""`ptb eval` and `ptb baseline`: score a model directory or a base model on a benchmark."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Literal

import typer
from rich.console import Console

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.json_output import stdout_to_stderr
from posttrainbench.host.cli.options import BaseModelId, Benchmark, Json, out_option
from posttrainbench.task.schemas import Metrics

BackendName = Literal["transformers", "vllm"]  # evaluation.backends._BACKENDS
SplitName = Literal["test", "dev"]

Limit = typer.Option(None, "--limit", metavar="N", help="Score only the first N questions.")
Backend = typer.Option(
    None, "--backend", help="Generation backend: transformers (CPU/GPU) or vllm (GPU)."
)
Split = typer.Option("test", "--split", help="Data split: test or dev.")
Out = out_option(None, "Write the metrics JSON here.")

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
    as_json: bool = False,
    model_name: str | None = None,
) -> None:
    _preflight(benchmark, split, limit, out, completions_out)
    with contextlib.ExitStack() as stack:
        if as_json and out is None:  # the metrics are printed from a file the module writes
            out = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "metrics.json"
        with stdout_to_stderr(as_json):
            _run_evaluation(
                benchmark,
                model_path,
                split,
                console,
                [
                    ("--limit", limit),
                    ("--backend", backend),
                    ("--json-out", out),
                    ("--max-new-tokens", max_new_tokens),
                    ("--batch-size", batch_size),
                    ("--completions-out", completions_out),
                    # The chat template's family (PostTrainBench's model_type()).
                    ("--model-name", model_name),
                ],
            )
        if as_json and out is not None:
            typer.echo(out.read_text(encoding="utf-8").strip())


def _preflight(
    benchmark: str, split: str, limit: int | None, out: Path | None, completions_out: Path | None
) -> None:
    """Every argument checked before minutes of model download or evaluation: the ids,
    the split, the limit, and that the output files can be written."""
    from posttrainbench.host.catalog import get_benchmark
    from posttrainbench.host.cli.output_paths import check_output_file

    get_benchmark(benchmark)
    if split not in ("test", "dev"):
        raise PtbError(f"unknown split {split!r}; choose test or dev")
    if limit is not None and limit < 1:
        raise PtbError(f"invalid --limit {limit}: must be a positive integer")
    for flag, path in (("-o/--out", out), ("--completions-out", completions_out)):
        if path is not None:
            check_output_file(path, flag)


def _run_evaluation(
    benchmark: str,
    model_path: Path,
    split: str,
    console: Console,
    flags: list[tuple[str, object]],
) -> None:
    from posttrainbench.host.data.prepare import data_root, prepare_benchmark
    from posttrainbench.host.envs.eval_env import evaluation_python, run_module

    prepare_benchmark(benchmark)
    args = ["--benchmark", benchmark, "--split", split, "--model-path", str(model_path)]
    args.append("--progress")  # loading and answers done on stderr: no silent minutes
    for flag, value in flags:
        if value is not None:
            args += [flag, str(value)]
    code = run_module(
        evaluation_python(console.print),
        "posttrainbench.task.evaluation.evaluate",
        args,
        {"PTB_DATA_DIR": str(data_root())},
    )
    if code != 0:
        raise typer.Exit(code)


def eval_model(
    benchmark: str = Benchmark,
    model_path: Path = typer.Option(
        ..., "--model-path", metavar="DIR", help="A transformers model directory."
    ),
    limit: int | None = Limit,
    backend: BackendName | None = Backend,
    split: SplitName = Split,
    out: Path | None = Out,
    max_new_tokens: int | None = MaxNewTokens,
    batch_size: int | None = BatchSize,
    completions_out: Path | None = CompletionsOut,
    as_json: bool = Json,
    base_model: str | None = typer.Option(
        None,
        "-M",
        "--base-model",
        metavar="ID",
        help="The base model the directory was trained from: its family picks the chat "
        "template, as in the verifier (default: the family the path names, else its "
        "config.json's architecture, as PostTrainBench's evaluate.py).",
    ),
) -> None:
    """Evaluate a model directory on a benchmark (the same code the verifier runs).

    Example: ptb eval -b gsm8k --model-path out/final_model -M qwen3-1.7b --limit 50
    """
    from posttrainbench.host.catalog import get_benchmark, get_model

    get_benchmark(benchmark)
    model_name = get_model(base_model).source if base_model else None
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
        as_json,
        model_name,
    )


def baseline(
    benchmark: str = Benchmark,
    base_model: str = BaseModelId,
    limit: int | None = Limit,
    backend: BackendName | None = Backend,
    out: Path | None = Out,
    max_new_tokens: int | None = MaxNewTokens,
    batch_size: int | None = BatchSize,
    as_json: bool = Json,
) -> None:
    """Measure a base model's zero-shot score on a benchmark (model fetched into the cache).

    Example: ptb baseline -b gsm8k -M qwen3-1.7b --limit 50
    """
    from posttrainbench.host.catalog import get_model
    from posttrainbench.host.data.models import prepare_models
    from posttrainbench.host.data.prepare import default_cache_dir

    spec = get_model(base_model)
    _preflight(benchmark, "test", limit, out, None)  # before the model is fetched
    console = Console()
    # The same preparation as `ptb data prepare -m`, with its progress lines (on stderr).
    say = Console(stderr=True).print
    model_dir = prepare_models([spec], default_cache_dir(), force=False, say=say)[spec.id]
    with tempfile.TemporaryDirectory() as scratch:
        metrics_file = out or Path(scratch) / "metrics.json"
        _evaluate(
            benchmark,
            model_dir,
            limit,
            backend,
            "test",
            metrics_file,
            console,
            max_new_tokens,
            batch_size,
            as_json=as_json,
            model_name=spec.source,
        )
        metrics = Metrics.load(metrics_file)
    if metrics.error is None and metrics.n > 0:
        where = _record_baseline(benchmark, spec.id, limit, metrics)
        say(f"stored in {where} (`ptb list baselines`)", highlight=False, soft_wrap=True)


def _record_baseline(benchmark: str, model: str, limit: int | None, metrics: Metrics) -> Path:
    """Keep the measurement where `ptb list baselines` and the leaderboard find it."""
    from datetime import UTC, datetime

    from posttrainbench.host.data.measured_baselines import (
        MeasuredBaseline,
        record_measured,
        this_machine,
    )

    return record_measured(
        MeasuredBaseline(
            benchmark=benchmark,
            model=model,
            score=metrics.accuracy,
            stderr=metrics.stderr,
            n=metrics.n,
            limit=limit,
            backend=metrics.backend,
            measured_at=datetime.now(UTC),
            machine=this_machine(),
        )
    )
