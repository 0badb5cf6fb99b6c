"""The leaderboard's default benchmark weights: PostTrainBench's ``scripts/factors.json``.

``data/weights.json`` holds PostTrainBench's factors with their provenance; they weigh
its seven benchmarks (and sum to 1, so the weighted average is PostTrainBench's single
metric, see ``host.results.collect``). A benchmark plugin's ``weight`` counts only for a
benchmark the factors do not weigh (one added with a new plugin).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.host.catalog.baselines import PtbSource
from posttrainbench.task.benchmarks.plugin import plugins


class PtbWeightsFile(BaseModel):
    """``data/weights.json``: PostTrainBench's factors by benchmark id."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    about: str = Field(alias="_about")
    source: PtbSource
    weights: dict[str, float] = Field(min_length=1)


@cache
def ptb_weights() -> PtbWeightsFile:
    """PostTrainBench's factors as the catalog keeps them (``data/weights.json``)."""
    text = resources.files("posttrainbench.host.catalog").joinpath("data", "weights.json")
    return PtbWeightsFile.model_validate(json.loads(text.read_text("utf-8")))


def default_weights() -> dict[str, float]:
    """Weight per benchmark id: PostTrainBench's factor, else the plugin's ``weight``."""
    factors = ptb_weights().weights
    return {b: factors.get(b, p.weight) for b, p in plugins().items()}
