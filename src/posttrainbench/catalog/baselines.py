"""Reference scores per (benchmark, base model), kept as data with their provenance.

``kind``: ``zero_shot`` / ``few_shot`` (the base model itself, e.g. measured with
``ptb baseline``) or ``instruct`` (the official instruction-tuned model: the target an
agent's post-training is compared with). ``model`` ``"*"`` marks a number published
as a mean over the four base models.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
    """All baseline entries in file order."""
    text = resources.files("posttrainbench.catalog").joinpath("data", "baselines.json").read_text()
    return tuple(BaselineEntry.model_validate(row) for row in json.loads(text))
