"""Typed options of one task compilation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.task.sandbox.handoff import DEFAULT_SIZE_FACTOR
from posttrainbench.task.schemas import EvalVariant

# Default Docker base image of tasks without a GPU: the offline CPU image that
# scripts/docker/build_base_image.sh builds. GPU tasks default to the pinned CUDA image
# of host/tasks/data/gpu_image.json (posttrainbench.host.tasks.gpu_image).
DEFAULT_CPU_BASE_IMAGE = "posttrainbench/cpu-base:bookworm"
# PostTrainBench's hardware: one H100 per task.
DEFAULT_GPU_TYPE = "H100"


class CompileOptions(BaseModel):
    """Everything that shapes a compiled task besides the benchmark and the model."""

    model_config = ConfigDict(extra="forbid")

    hours: float = Field(default=10.0, gt=0, le=168)
    gpus: int | None = Field(
        default=None, ge=0, le=8, description="None: 1, or 0 for offline CPU models"
    )
    cpus: int = Field(default=16, ge=1)
    memory_gb: int = Field(default=128, ge=1)
    storage_gb: int = Field(default=200, ge=1)
    feedback: Literal["test", "dev", "none"] = Field(
        default="test",
        description="test: evaluate.py scores the test set (PostTrainBench parity); "
        "dev: a disjoint held-out split; none: no score",
    )
    agent_eval_budget: int | None = Field(
        default=None, ge=1, description="max evaluate.py runs; None = unlimited"
    )
    agent_eval_limit: int | None = Field(default=None, ge=1)
    final_eval_limit: int | None = Field(default=None, ge=1)
    score_base_model: bool = False
    verifier_timeout_min: float = Field(default=240, gt=0)
    solution_steps: int | None = Field(
        default=None,
        ge=1,
        description="Reference solution's optimizer steps (a fixed amount of training, "
        "whatever the machine's load); None: the solution's default",
    )
    base_image: str | None = Field(
        default=None,
        description="None: the pinned CUDA image for GPU tasks, else the offline CPU image",
    )
    gpu_type: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+!-]*$",
        description="The GPU model a GPU task asks for (task.toml's environment.gpu_types); None: "
        f"{DEFAULT_GPU_TYPE}. Tasks without a GPU ask for none and ignore it",
    )
    model_from: Literal["image", "cache"] = Field(
        default="image",
        description="image: the base model is downloaded into the task image when it is built; "
        "cache: it is read from the shared cache volume (/ptb-cache/models/<id>, `ptb cache push`) when the "
        "sandbox starts, never downloaded",
    )
    final_model_size_factor: float = Field(
        default=DEFAULT_SIZE_FACTOR,
        gt=0,
        le=100,
        description="final_model may be this many times the base model's size (apparent and allocated), "
        "plus room for tokenizer files; larger is rejected by the collect hook, with the reason in metrics.json",
    )
    seed: int = 0
    variant: EvalVariant | None = Field(
        default=None,
        description="the final evaluation's definition; None: smoke without a GPU, "
        "posttrainbench with one",
    )
