"""The leaderboard's file contract: `leaderboard.json`, and the rows of its CSV files."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.host.results.record import RunStatus

Policy = Literal["latest", "best", "mean", "ptb"]
CellSource = Literal["run", "baseline", "none"]
# no_model: the agent's runs left no usable model; errored: they failed (agent, infra, verifier).
FallbackReason = Literal["missing", "no_model", "errored", "flagged"]


class Cell(BaseModel):
    """One agent x benchmark x base model score, with what it cost."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    benchmark: str
    base_model: str
    score: float | None = Field(
        description="the runs' score by the policy, or the baseline (see source)"
    )
    source: CellSource
    fallback: FallbackReason | None = Field(
        default=None,
        description="why the baseline stands in: no run, no run left a usable model, "
        "only errored runs, or every run flagged",
    )
    fallback_reason: str | None = Field(
        default=None,
        description="for no_model and errored: the latest such run's one-line reason",
    )
    selected: list[str] = Field(
        default_factory=list, description="ids of the runs the score comes from"
    )
    note: str | None = Field(
        default=None, description="e.g. that the latest run is below the best one"
    )
    task_version: str | None = Field(
        default=None, description="the task version the cell's scores come from"
    )
    version_note: str | None = Field(
        default=None, description="set when the cell's runs were scored by several versions"
    )
    n_runs: int = Field(default=0, description="scored runs that no judge flagged")
    n_questions: int | None = Field(
        default=None,
        description="questions each of those runs was scored on (the fewest, if they differ): "
        "a 5-question cell is not a 50-question one",
    )
    n_no_model: int = Field(default=0, description="runs that left no usable final model")
    n_errored: int = Field(default=0, description="runs with an agent, infra or verifier error")
    n_flagged: int = 0
    n_unjudged: int = Field(default=0, description="scored runs whose judges did not all decide")
    mean: float | None = Field(default=None, description="mean over the scored, unflagged runs")
    stderr: float | None = Field(default=None, description="standard error of that mean (2+ runs)")
    ci95: list[float] | None = Field(
        default=None,
        description="95% interval of the score [low, high]: over the runs (2+), else over "
        "the one run's questions",
    )
    best: float | None = None
    latest: float | None = None
    baseline: float | None = None
    baseline_source: str | None = None
    instruct: float | None = None
    normalized: float | None = Field(
        default=None,
        description="(score - baseline) / (instruct - baseline): the share of the gap closed",
    )
    cost_usd: float | None = Field(default=None, description="summed over every run of the cell")
    input_tokens: int | None = None
    output_tokens: int | None = None
    gpu_hours: float = 0.0
    agent_hours: float | None = Field(default=None, description="mean agent time per run")
    budget_hours: float | None = None
    time_fraction: float | None = Field(
        default=None, description="mean share of the time budget used"
    )


class AgentSummary(BaseModel):
    """One leaderboard row: an agent (with its model) over the whole grid."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    rank: int
    average: float | None = Field(description="mean cell score over the grid")
    weighted_average: float | None = Field(description="cells weighted by their benchmark's weight")
    normalized_average: float | None = None
    per_benchmark: dict[str, float | None] = Field(
        default_factory=dict, description="mean cell score per benchmark, over the base models"
    )
    n_cells: int
    n_cells_scored: int = Field(description="cells with a score (run or baseline)")
    n_fallback: int = Field(description="cells where the baseline stands in")
    n_runs: int = 0
    n_no_model: int = 0
    n_errored: int = 0
    n_flagged: int = 0
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    gpu_hours: float = 0.0
    agent_hours: float = Field(default=0.0, description="summed agent time over all runs")
    time_fraction: float | None = Field(default=None, description="mean share of the budget used")


class RunRow(BaseModel):
    """One exported run, as listed in `runs.csv` and on the report's run pages."""

    model_config = ConfigDict(extra="forbid")

    id: str
    agent: str
    benchmark: str
    base_model: str
    attempt: int = Field(description="1-based, by start time within its cell")
    status: RunStatus
    score: float | None = None
    normalized: float | None = Field(
        default=None, description="the run's share of the base-to-instruct gap closed"
    )
    flagged: bool | None = None
    flagged_by: list[str] = Field(default_factory=list)
    selected: bool = Field(default=False, description="whether the cell's score uses this run")
    error: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    gpu_hours: float = 0.0
    agent_hours: float | None = None
    budget_hours: float | None = None
    started_at: datetime | None = None
    job_name: str
    trial_name: str
    task_version: str | None = None
    rescore_of: str | None = Field(default=None, description="a re-score of this run id")


class BaselineUsed(BaseModel):
    """A base-model score the leaderboard fell back on or normalized with."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    base_model: str
    kind: Literal["base", "instruct"]
    score: float
    source: str


class JudgeAgreement(BaseModel):
    """How much one judge's LLM votes agreed, over every run it reviewed with 2+ votes."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    n_verdicts: int = Field(description="verdicts with two or more LLM votes")
    n_votes: int
    mean_agreement: float = Field(description="mean share of votes agreeing with the majority")
    low_agreement: list[str] = Field(
        default_factory=list, description="ids of the runs whose verdict had low agreement"
    )


class Leaderboard(BaseModel):
    """Everything `ptb results collect` computes; `leaderboard.json`."""

    model_config = ConfigDict(extra="forbid")

    generated_at: datetime
    results_dir: str
    policy: Policy
    weights: dict[str, float]
    benchmarks: list[str]
    base_models: list[str]
    agents: list[AgentSummary]
    cells: list[Cell]
    runs: list[RunRow]
    baselines: list[BaselineUsed] = Field(default_factory=list)
    judge_agreement: list[JudgeAgreement] = Field(
        default_factory=list, description="per judge, over verdicts with several LLM votes"
    )
    skipped: list[str] = Field(
        default_factory=list, description="records that could not be read, with why"
    )

    def write(self, path: Path) -> Path:
        """Write atomically (temp file + rename)."""
        return write_text_atomic(path, self.model_dump_json(indent=2) + "\n")

    def cell(self, agent: str, benchmark: str, base_model: str) -> Cell | None:
        """The cell for this agent, benchmark and base model, if the grid has it."""
        for cell in self.cells:
            if (cell.agent, cell.benchmark, cell.base_model) == (agent, benchmark, base_model):
                return cell
        return None
