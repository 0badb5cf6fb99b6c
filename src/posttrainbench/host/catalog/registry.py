"""The benchmark and base-model catalog.

Benchmarks come from the benchmark plugins (`benchmarks/<name>/plugin.json`, see
docs/adding-a-benchmark.md); adding a base model is one entry in `data/models.json`.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.errors import UnknownBenchmarkError, UnknownModelError
from posttrainbench.task.benchmarks.plugin import plugins


class BenchmarkSpec(BaseModel):
    """One benchmark an agent can be asked to post-train for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9]+$")
    display_name: str
    description: str
    data_source: str
    offline: bool = False
    llm_judge: bool = False


class BaseModelSpec(BaseModel):
    """One base model an agent may fine-tune."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9.\-]+$")
    display_name: str
    source: str
    family: str
    params_b: float
    offline: bool = False
    hub_id: str | None = Field(
        default=None,
        description="its Hugging Face id where `source` is not `hf:ID` (the offline model)",
    )

    @property
    def model_id(self) -> str:
        """The id PostTrainBench names the model by (its prompt's {model}): the hub id."""
        if self.hub_id:
            return self.hub_id
        return self.source.removeprefix("hf:")


def _load(name: str) -> list[dict]:
    text = resources.files("posttrainbench.host.catalog").joinpath("data", name).read_text()
    return json.loads(text)


@cache
def list_benchmarks() -> tuple[BenchmarkSpec, ...]:
    """All benchmarks, sorted by id: the plugins' catalog fields."""
    fields = set(BenchmarkSpec.model_fields)
    return tuple(
        BenchmarkSpec.model_validate(p.model_dump(include=fields)) for p in plugins().values()
    )


@cache
def list_models() -> tuple[BaseModelSpec, ...]:
    """All base models in catalog order."""
    return tuple(BaseModelSpec.model_validate(m) for m in _load("models.json"))


def get_benchmark(benchmark_id: str) -> BenchmarkSpec:
    """The benchmark with this id, or UnknownBenchmarkError naming the valid ids."""
    for spec in list_benchmarks():
        if spec.id == benchmark_id:
            return spec
    valid = ", ".join(b.id for b in list_benchmarks())
    raise UnknownBenchmarkError(f"unknown benchmark {benchmark_id!r}; choose one of: {valid}")


def get_model(model_id: str) -> BaseModelSpec:
    """The base model with this id, or UnknownModelError naming the valid ids."""
    for spec in list_models():
        if spec.id == model_id:
            return spec
    valid = ", ".join(m.id for m in list_models())
    raise UnknownModelError(f"unknown model {model_id!r}; choose one of: {valid}")
