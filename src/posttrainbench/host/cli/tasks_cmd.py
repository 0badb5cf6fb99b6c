"""`ptb tasks generate`: compile Harbor task directories."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from posttrainbench.core.errors import PtbError
from posttrainbench.host.catalog import get_model, list_benchmarks, list_models
from posttrainbench.host.cli.options import (
    BaseImage,
    Cpus,
    EvalBudget,
    EvalLimit,
    Feedback,
    FeedbackName,
    Gpus,
    GpuType,
    Hours,
    MemoryGb,
    ModelFrom,
    ModelSource,
    Offline,
    TrainSteps,
    Variant,
    VariantName,
    compile_options,
    out_option,
)

app = typer.Typer(help="Compile PostTrainBench tasks for Harbor.", no_args_is_help=True)


@app.command("generate")
def generate(
    out: Path = out_option(..., "Directory to write the task directories into."),
    benchmark: str | None = typer.Option(
        None, "-b", "--benchmark", metavar="ID", help="Benchmark id (see `ptb list benchmarks`)."
    ),
    model: str | None = typer.Option(
        None, "-M", "--base-model", metavar="ID", help="Base model id (see `ptb list models`)."
    ),
    all_pairs: bool = typer.Option(
        False, "--all", help="Every implemented benchmark x every model."
    ),
    hours: float = Hours,
    gpus: int | None = Gpus,
    cpus: int = Cpus,
    memory_gb: int = MemoryGb,
    base_image: str | None = BaseImage,
    gpu_type: str | None = GpuType,
    model_from: ModelSource = ModelFrom,
    eval_limit: int | None = EvalLimit,
    variant: VariantName | None = Variant,
    train_steps: int | None = TrainSteps,
    feedback: FeedbackName = Feedback,
    eval_budget: int | None = EvalBudget,
    offline: bool = Offline,
) -> None:
    """Write one Harbor task directory per (benchmark, base model) pair.

    Example: ptb tasks generate -b gsm8k -M qwen3-1.7b -o tasks/
    """
    from posttrainbench.host.tasks.compiler import compile_task

    if all_pairs == bool(benchmark or model):
        raise PtbError("give either --benchmark and --base-model, or --all")
    if not all_pairs and not (benchmark and model):
        raise PtbError("--benchmark and --base-model are both required without --all")
    options = compile_options(
        hours=hours,
        gpus=gpus,
        cpus=cpus,
        memory_gb=memory_gb,
        base_image=base_image,
        gpu_type=gpu_type,
        model_from=model_from,
        final_eval_limit=eval_limit,
        variant=variant,
        solution_steps=train_steps,
        feedback=feedback,
        agent_eval_budget=eval_budget,
    )
    if all_pairs:
        pairs = [(b.id, m.id) for b in list_benchmarks() for m in list_models()]
    else:
        get_model(model)  # validate both ids before writing anything
        pairs = [(benchmark, model)]
    console = Console()
    for benchmark_id, model_id in pairs:
        path = compile_task(benchmark_id, model_id, out, options, offline=offline)
        console.print(f"wrote {path}")
