"""Reference scores per (benchmark, base model), kept as data with their provenance.

``kind``: ``zero_shot`` / ``few_shot`` (the base model itself, e.g. measured with
``ptb baseline``) or ``instruct`` (the official instruction-tuned model: the target an
agent's post-training is compared with). ``model`` ``"*"`` marks a number published
as a mean over the four base models.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.benchmarks.plugin import plugins


class BaselineEntry(BaseModel):
    """One reference score and where it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: str
    model: str = Field(description="catalog model id, or '*' for a mean over the base models")
    kind: Literal["zero_shot", "few_shot", "instruct"]
    score: float = Field(ge=0.0, le=1.0)
    n: int | None = Field(default=None, ge=1)
    provenance: str


@cache
def list_baselines() -> tuple[BaselineEntry, ...]:
    """The published baselines of every benchmark plugin, by benchmark id."""
    return tuple(
        BaselineEntry(benchmark=benchmark_id, **entry.model_dump())
        for benchmark_id, plugin in plugins().items()
        for entry in plugin.baselines
    )
