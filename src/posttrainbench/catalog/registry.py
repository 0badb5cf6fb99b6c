"""Load the benchmark and base-model catalog from the JSON files in `data/`.

Adding a benchmark or a model is a data change: one entry in a JSON file.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, computed_field

from posttrainbench.benchmarks import available_benchmarks
from posttrainbench.errors import UnknownBenchmarkError, UnknownModelError


class BenchmarkSpec(BaseModel):
    """One benchmark an agent can be asked to post-train for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9]+$")
    display_name: str
    description: str
    data_source: str
    offline: bool = False
    llm_judge: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def implemented(self) -> bool:
        """Whether the benchmarks registry has its evaluator (the one home of that fact)."""
        return self.id in available_benchmarks()


class BaseModelSpec(BaseModel):
    """One base model an agent may fine-tune."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9.\-]+$")
    display_name: str
    source: str
    family: str
    params_b: float
    offline: bool = False


def _load(name: str) -> list[dict]:
    text = resources.files("posttrainbench.catalog").joinpath("data", name).read_text()
    return json.loads(text)


@cache
def list_benchmarks() -> tuple[BenchmarkSpec, ...]:
    """All benchmarks in catalog order."""
    return tuple(BenchmarkSpec.model_validate(b) for b in _load("benchmarks.json"))


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
