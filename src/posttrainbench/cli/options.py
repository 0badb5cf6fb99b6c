"""Command-line options shared by several commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from posttrainbench.tasks.options import CompileOptions

Hours = typer.Option(10.0, "--hours", help="The agent's time budget in hours.")
Gpus = typer.Option(None, "--gpus", help="GPUs per task (default 1; 0 for the offline CPU model).")
Cpus = typer.Option(16, "--cpus", help="CPU cores the task asks for.")
MemoryGb = typer.Option(128, "--memory-gb", help="Memory the task asks for, in GB.")
BaseImage = typer.Option(
    None,
    "--base-image",
    help="Docker base image (default: the pinned CUDA image of docs/gpu-image.md with "
    "GPUs, else posttrainbench/cpu-base:bookworm from scripts/docker/build_base_image.sh).",
)
ModelFrom = typer.Option(
    "image",
    "--model-from",
    help="Where the base model comes from: image (downloaded "
    "into the task image at build) or cache (the shared cache volume; `ptb cache push`).",
)
CacheVolume = typer.Option(
    None,
    "--cache-volume",
    help="--env modal|daytona: a volume with base models and "
    "data (`ptb cache push`), mounted read-only at /ptb-cache in every sandbox.",
)
GpuType = typer.Option(
    None,
    "--gpu-type",
    help="The one GPU type GPU tasks ask for (default H100; task.toml gpu_types).",
)
EvalLimit = typer.Option(
    None, "--eval-limit", help="Score only the first N test questions (smoke tests; default: all)."
)
Feedback = typer.Option(
    "test",
    "--feedback",
    help="What the agent's evaluate.py scores: test (the scored test set, "
    "PostTrainBench parity), dev (a disjoint held-out split) or none.",
)
EvalBudget = typer.Option(
    None, "--eval-budget", help="Max evaluate.py runs for the agent (default: unlimited)."
)
Offline = typer.Option(
    False,
    "--offline",
    help="Use only the prepared-data cache (`ptb data prepare`); never download.",
)
Benchmark = typer.Option(..., "--benchmark", "-b", help="Benchmark id (see `ptb list benchmarks`).")
Model = typer.Option(..., "--model", "-m", help="Base model id (see `ptb list models`).")


def check_cache_flags(env: str, model_from: str, cache_volume: str | None) -> None:
    """`--cache-volume` only where volumes exist, and `--model-from cache` only with one."""
    from posttrainbench.errors import PtbError

    if cache_volume is not None and env not in ("modal", "daytona"):
        raise PtbError(f"--cache-volume: only with --env modal or daytona, not {env}")
    if model_from == "cache" and cache_volume is None:
        raise PtbError(
            "--model-from cache needs --cache-volume VOLUME (and --env modal or daytona)"
        )


def compile_options(**values: Any) -> CompileOptions:
    """Build CompileOptions, turning a validation failure into one clear line."""
    from pydantic import ValidationError

    from posttrainbench.errors import PtbError
    from posttrainbench.tasks.options import CompileOptions

    try:
        return CompileOptions(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise PtbError(f"invalid --{field.replace('_', '-')}: {first['msg']}") from None
