"""Typed options of one task compilation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The base image of GPU runs; offline CPU runs pass their own image as a build argument.
DEFAULT_GPU_BASE_IMAGE = "pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime"


class CompileOptions(BaseModel):
    """Everything that shapes a compiled task besides the benchmark and the model."""

    model_config = ConfigDict(extra="forbid")

    hours: float = Field(default=10.0, gt=0, le=168)
    gpus: int | None = Field(default=None, ge=0, le=8, description="None: 1, or 0 for offline CPU models")
    cpus: int = Field(default=16, ge=1)
    memory_gb: int = Field(default=128, ge=1)
    storage_gb: int = Field(default=200, ge=1)
    feedback: Literal["test"] = "test"
    agent_eval_limit: int | None = Field(default=None, ge=1)
    final_eval_limit: int | None = Field(default=None, ge=1)
    score_base_model: bool = False
    verifier_timeout_min: float = Field(default=240, gt=0)
    solution_minutes: float = Field(default=60, gt=0)
    base_image: str = DEFAULT_GPU_BASE_IMAGE
    seed: int = 0
