"""Reference scores per (benchmark, base model), kept as data with their provenance.

``kind``: ``zero_shot`` / ``few_shot`` (the base model itself, e.g. measured with
``ptb baseline``) or ``instruct`` (the official instruction-tuned model: the target an
agent's post-training is compared with). ``model`` ``"*"`` marks a mean over the base
models.

PostTrainBench's own numbers (its ``scripts/baselines.json``) live in
``data/baselines.json``, by catalog model id: for each of its four base models the base
model's zero-shot and few-shot scores and its instruct model's zero-shot score on every
benchmark. They are the only home of those numbers; a benchmark plugin's ``baselines``
are for benchmarks PostTrainBench does not score, and may not repeat a fact the file holds.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.task.benchmarks.plugin import plugins

BaselineKind = Literal["zero_shot", "few_shot", "instruct"]


class BaselineEntry(BaseModel):
    """One reference score and where it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: str
    model: str = Field(description="catalog model id, or '*' for a mean over the base models")
    kind: BaselineKind
    score: float = Field(ge=0.0, le=1.0)
    n: int | None = Field(default=None, ge=1)
    provenance: str


class PtbSource(BaseModel):
    """Where a file of PostTrainBench's comes from: repository, branch, commit and path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    branch: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    file: str
    license: str = Field(description="PostTrainBench's licence (MIT)")
    copyright: str = Field(description="its copyright line, which the MIT licence asks to keep")

    def cite(self) -> str:
        """Short provenance: ``file, repo@commit7 (branch)``."""
        return f"{self.file}, {self.repo}@{self.commit[:7]} ({self.branch})"


Scores = dict[str, float]


class PtbModelBaselines(BaseModel):
    """One catalog base model's rows of PostTrainBench's baselines.json."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="catalog model id")
    ptb_base: str = Field(description="PostTrainBench's name of the base model (HF repo name)")
    ptb_instruct: str = Field(description="PostTrainBench's name of its instruct model")
    zero_shot: Scores = Field(description="baselines.json zeroshot[ptb_base], by benchmark id")
    few_shot: Scores = Field(description="baselines.json fewshot[ptb_base], by benchmark id")
    instruct: Scores = Field(description="baselines.json zeroshot[ptb_instruct], by benchmark id")


class PtbBaselinesFile(BaseModel):
    """``data/baselines.json``: PostTrainBench's baselines mapped to catalog ids."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    about: str = Field(alias="_about")
    source: PtbSource
    models: list[PtbModelBaselines] = Field(min_length=1)


def _data(name: str) -> str:
    return resources.files("posttrainbench.host.catalog").joinpath("data", name).read_text("utf-8")


@cache
def ptb_baselines() -> PtbBaselinesFile:
    """PostTrainBench's baselines as the catalog keeps them (``data/baselines.json``)."""
    return PtbBaselinesFile.model_validate(json.loads(_data("baselines.json")))


def _ptb_entries(data: PtbBaselinesFile) -> list[BaselineEntry]:
    cite = data.source.cite()
    sections: tuple[tuple[BaselineKind, str, str], ...] = (
        ("zero_shot", "zero_shot", "zeroshot"),
        ("few_shot", "few_shot", "fewshot"),
        ("instruct", "instruct", "zeroshot"),
    )
    entries: list[BaselineEntry] = []
    for row in data.models:
        for kind, field, section in sections:
            name = row.ptb_instruct if kind == "instruct" else row.ptb_base
            for benchmark, score in getattr(row, field).items():
                entries.append(
                    BaselineEntry(
                        benchmark=benchmark,
                        model=row.model,
                        kind=kind,
                        score=score,
                        provenance=f"PostTrainBench {section}[{name!r}], {cite}",
                    )
                )
    # The instruct mean over the four base models: the target for a model PostTrainBench
    # has no instruct number for (the offline demo model), derived, never stored twice.
    by_benchmark: dict[str, list[float]] = {}
    for row in data.models:
        for benchmark, score in row.instruct.items():
            by_benchmark.setdefault(benchmark, []).append(score)
    names = ", ".join(row.ptb_instruct for row in data.models)
    for benchmark, scores in by_benchmark.items():
        entries.append(
            BaselineEntry(
                benchmark=benchmark,
                model="*",
                kind="instruct",
                score=sum(scores) / len(scores),
                provenance=f"PostTrainBench zeroshot, mean over {names}, {cite}",
            )
        )
    return entries


@cache
def list_baselines() -> tuple[BaselineEntry, ...]:
    """Every catalog baseline: PostTrainBench's, then those the benchmark plugins publish.

    Raises ValueError where a plugin repeats a (benchmark, model, kind) PostTrainBench's
    file already holds: one number per fact.
    """
    entries = _ptb_entries(ptb_baselines())
    known = {(e.benchmark, e.model, e.kind) for e in entries}
    for benchmark_id, plugin in plugins().items():
        for published in plugin.baselines:
            entry = BaselineEntry(benchmark=benchmark_id, **published.model_dump())
            if (entry.benchmark, entry.model, entry.kind) in known:
                raise ValueError(
                    f"benchmark plugin {benchmark_id!r} repeats the {entry.kind} baseline of "
                    f"model {entry.model!r} that host/catalog/data/baselines.json holds"
                )
            entries.append(entry)
    return tuple(entries)
