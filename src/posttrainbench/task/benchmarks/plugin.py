"""A benchmark is one plugin: a folder under ``benchmarks/`` with a ``plugin.json``.

The folder owns everything that is particular to the benchmark: ``plugin.json``
(:class:`BenchmarkPlugin`: catalog metadata, leaderboard weight, the judges' lookup
patterns, published baselines, and where its evaluator and data source live),
the evaluator (a :class:`~posttrainbench.task.benchmarks.base.Benchmark`, which also maps a
prepared record to the text a contaminated file would hold), the data source, and
``context.md`` (what the agent is told about the benchmark). The catalog, the data
preparer, the judges, the leaderboard and the task compiler read it from here; nothing
else names a benchmark. docs/adding-a-benchmark.md is the how-to.

Stdlib and pydantic only: this runs inside tasks too.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PLUGIN_FILE = "plugin.json"
CONTEXT_FILE = "context.md"
_PACKAGE_DIR = Path(__file__).resolve().parent


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LookupPatterns(_Strict):
    """What looking up this benchmark's answers or published results looks like.

    ``names``: how it is written in a search; ``flag``: regexes over URLs, commands, tool
    inputs and code that fetch the scored test data (a violation on its own); ``note``:
    regexes worth a look that can be legitimate (e.g. the train split of the dataset).
    """

    names: list[str] = Field(min_length=1)
    flag: list[str] = Field(default_factory=list)
    note: list[str] = Field(default_factory=list)


class PublishedBaseline(_Strict):
    """A reference score for this benchmark and where it comes from."""

    model: str = Field(description="catalog model id, or '*' for a mean over the base models")
    kind: Literal["zero_shot", "few_shot", "instruct"]
    score: float = Field(ge=0.0, le=1.0)
    n: int | None = Field(default=None, ge=1)
    provenance: str


PtbMetric = Literal["accuracy", "stderr"]
# inspect's accuracy() and stderr(): what most of PostTrainBench's tasks report.
PTB_METRICS: tuple[PtbMetric, ...] = ("accuracy", "stderr")


class PtbCommandLine(_Strict):
    """The defaults of PostTrainBench's ``src/eval/tasks/<id>/evaluate.py`` command line.

    The agent's ``evaluate.py`` takes the same flags with the same defaults.
    """

    limit: int | None = Field(description="--limit's default; None: every question")
    max_tokens: int = Field(ge=1, description="the default of the token cap's flag")
    tokens_flag: Literal["--max-tokens", "--max-new-tokens"] = "--max-tokens"
    max_connections: int | None = Field(default=None, ge=1, description="None: no such flag")
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)
    cascade: list[int] = Field(
        default_factory=list,
        description="run_task.sh's reduced token caps, tried in order after a failed final eval",
    )

    @property
    def token_ladder(self) -> list[int]:
        """The final evaluation's token caps, in the order they are tried."""
        return [self.max_tokens, *self.cascade]


class PtbIdentity(_Strict):
    """How PostTrainBench presents this benchmark (its ``src/eval/tasks/<id>/``: our ids are
    its folder names)."""

    name: str = Field(description="its benchmark.txt: the {benchmark} of the agent's prompt")
    inspect: bool = Field(description="listed in get_prompt.py's INSPECT_EVALS (the prompt's note)")
    cli: PtbCommandLine
    templates: dict[str, str] = Field(
        default_factory=dict,
        description="family -> chat template file where its evaluate.py differs (BFCL's Gemma)",
    )
    metrics: list[PtbMetric] = Field(
        default_factory=lambda: list(PTB_METRICS),
        description="the keys its --json-output-file holds (inspect's metrics of the task)",
    )


class BenchmarkPlugin(_Strict):
    """``plugin.json``: one benchmark's identity and the import paths of its code."""

    id: str = Field(pattern=r"^[a-z0-9]+$")
    display_name: str
    description: str
    data_source: str = Field(description="where the data is published, e.g. hf:ORG/NAME")
    published_test_items: int | None = Field(
        default=None,
        ge=1,
        description="the test split's size as published: data of another size is warned about",
    )
    offline: bool = Field(default=False, description="its data ships with the package")
    llm_judge: bool = Field(default=False, description="scored by an LLM judge or grader")
    weight: float = Field(default=1.0, ge=0.0, description="weight in the leaderboard average")
    evaluator: str = Field(pattern=r"^[a-z0-9_]+:[A-Za-z0-9_]+$", description="module:Class")
    source: str = Field(pattern=r"^[a-z0-9_]+:[A-Za-z0-9_]+$", description="module:Class")
    posttrainbench: PtbIdentity | None = Field(
        default=None, description="None: a benchmark PostTrainBench does not have"
    )
    lookup: LookupPatterns
    baselines: list[PublishedBaseline] = Field(default_factory=list)
    folder: str = Field(default="", exclude=True, description="set by the loader")

    def load(self, attribute: str) -> type:
        """The class named by ``evaluator`` or ``source``, from the plugin's folder."""
        module, _, name = getattr(self, attribute).partition(":")
        package = f"{__package__}.{self.folder}.{module}"
        cls: type = getattr(importlib.import_module(package), name)
        return cls

    @property
    def prompt_name(self) -> str:
        """The benchmark's name in the agent's prompt: PostTrainBench's where it has one."""
        return self.posttrainbench.name if self.posttrainbench else self.display_name

    @property
    def command_line(self) -> PtbCommandLine:
        """The agent's ``evaluate.py`` defaults: PostTrainBench's, or generic ones."""
        if self.posttrainbench:
            return self.posttrainbench.cli
        return PtbCommandLine(limit=None, max_tokens=4000)

    @property
    def template_overrides(self) -> dict[str, str]:
        """Family -> chat template file, where this benchmark's evaluate.py picks another."""
        return dict(self.posttrainbench.templates) if self.posttrainbench else {}

    def context_text(self) -> str:
        """What the agent's task_context/README.md says about the benchmark."""
        return (_PACKAGE_DIR / self.folder / CONTEXT_FILE).read_text(encoding="utf-8").strip()


@cache
def plugins() -> dict[str, BenchmarkPlugin]:
    """Every benchmark plugin of the package, by id (sorted)."""
    found: dict[str, BenchmarkPlugin] = {}
    for path in sorted(_PACKAGE_DIR.glob(f"*/{PLUGIN_FILE}")):
        plugin = BenchmarkPlugin.model_validate_json(path.read_text(encoding="utf-8"))
        plugin = plugin.model_copy(update={"folder": path.parent.name})
        if plugin.id in found:
            raise ValueError(f"benchmark id {plugin.id!r} is declared by two plugins")
        found[plugin.id] = plugin
    return dict(sorted(found.items()))
