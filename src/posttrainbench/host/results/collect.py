"""`ptb results collect`: the results store into a leaderboard.

The grid is every agent (with its model) x every benchmark x every base model found in
the store. A cell's score comes from its completed, unflagged runs under the selection
policy; where there are none (no run, runs that left no usable model, only errored runs,
or every run flagged by a judge) the base model's baseline stands in (PostTrainBench's
zero-shot score of it, see reference_scores), and the cell says so, with the reason of
the latest run behind a no_model or errored fallback. An agent's weighted average is
PostTrainBench's single metric (`weighted_average`), by default with its factors.json.
Policy ``ptb`` is PostTrainBench's collect.py instead (`_ptb_rule`): the latest run alone
decides, and only its zero-shot baseline stands in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from posttrainbench.core.trial_outcome import ERROR_KINDS
from posttrainbench.host.catalog import list_benchmarks, list_models
from posttrainbench.host.catalog.baselines import BaselineEntry
from posttrainbench.host.results.judge_agreement import judge_agreement
from posttrainbench.host.results.ptb_layout import is_clean
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.reference_scores import ReferenceScores
from posttrainbench.host.results.selection import select, start_order
from posttrainbench.host.results.table import (
    AgentSummary,
    BaselineUsed,
    Cell,
    CellSource,
    FallbackReason,
    Leaderboard,
    Policy,
    RunRow,
)
from posttrainbench.host.results.task_versions import current_runs


def _catalog_order(found: set[str], catalog: list[str]) -> list[str]:
    """Catalog order first, then anything unknown alphabetically."""
    return [x for x in catalog if x in found] + sorted(found - set(catalog))


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _fallback(
    flagged: list[ResultRecord], no_model: list[ResultRecord], errored: list[ResultRecord]
) -> tuple[FallbackReason, str | None]:
    """Why the baseline stands in, and the latest such run's reason. A run that left no
    model is the agent's own result, so it says more than an error does."""
    if flagged:
        return "flagged", None
    if no_model:
        return "no_model", max(no_model, key=start_order).error
    if errored:
        return "errored", max(errored, key=start_order).error
    return "missing", None


@dataclass(frozen=True)
class _PtbPick:
    score: float | None
    source: CellSource
    selected: list[str]
    why: FallbackReason | None = None
    reason: str | None = None
    note: str | None = None


def _ptb_rule(runs: list[ResultRecord], zero_shot: BaselineUsed | None) -> _PtbPick:
    """PostTrainBench's collect.py on one cell: the latest run, scored only if it completed
    and is clean; else its zero-shot baseline (none: the cell is empty, as there)."""
    latest = max(runs, key=start_order, default=None)
    if latest is not None and latest.status == "completed" and is_clean(latest):
        return _PtbPick(latest.score, "run", [latest.id])
    why: FallbackReason
    if latest is None:
        why, reason = "missing", None
    elif latest.status == "completed":
        why = "flagged"
        reason = (
            f"the latest run ({latest.trial_name}) was "
            + ("flagged" if latest.flagged else "not cleared by every judge")
            + "; PostTrainBench's rule falls back to the baseline"
        )
    else:
        why = "no_model" if latest.status == "no_model" else "errored"
        reason = f"the latest run ({latest.trial_name}): {latest.error or latest.status}"
    earlier = [r for r in runs if r.status == "completed" and is_clean(r)]
    note = (
        f"{len(earlier)} earlier clean run(s) not used: PostTrainBench's rule takes the latest"
        if earlier
        else None
    )
    if zero_shot is None:
        return _PtbPick(None, "none", [], why, reason, note)
    return _PtbPick(zero_shot.score, "baseline", [], why, reason, note)


Z95 = 1.959964  # the standard normal's 97.5th percentile


def ci95(
    score: float | None, stderr: float | None, selected: list[ResultRecord]
) -> list[float] | None:
    """A 95% interval for a cell's score (normal approximation, clipped to [0, 1]): over
    its runs when the score is a mean of several, else over the one run's questions (its
    metrics' standard error). None when neither is known."""
    if score is None:
        return None
    if len(selected) < 2 or stderr is None:
        runs = [r for r in selected if r.metrics is not None]
        stderr = runs[0].metrics.stderr if len(runs) == 1 and runs[0].metrics else None
    if stderr is None:
        return None
    return [max(0.0, score - Z95 * stderr), min(1.0, score + Z95 * stderr)]


def _cell(
    agent: str,
    benchmark: str,
    model: str,
    runs: list[ResultRecord],
    policy: Policy,
    refs: ReferenceScores,
    all_versions: bool = False,
) -> Cell:
    # Cost and time belong to the agent's own runs; a re-score only scores one again.
    agent_runs = [r for r in runs if r.rescore_of is None]
    versioned = current_runs(runs, all_versions=all_versions)
    runs = versioned.runs
    scored = [r for r in runs if r.status == "completed"]
    flagged = [r for r in scored if r.flagged]
    candidates = [r for r in scored if not r.flagged]
    no_model = [r for r in runs if r.status == "no_model"]
    errored = [r for r in runs if r.status in ERROR_KINDS]
    pick = select(candidates, "latest" if policy == "ptb" else policy)
    base = refs.base(benchmark, model)
    instruct = refs.instruct(benchmark, model)
    fallback: FallbackReason | None = None
    fallback_reason: str | None = None
    if policy == "ptb":
        ptb = _ptb_rule(runs, refs.ptb_zero_shot(benchmark, model))
        pick = replace(pick, score=ptb.score, selected=ptb.selected, note=ptb.note)
        score, source, fallback, fallback_reason = ptb.score, ptb.source, ptb.why, ptb.reason
    elif candidates:
        score, source = pick.score, "run"
    else:
        fallback, fallback_reason = _fallback(flagged, no_model, errored)
        score, source = (base.score, "baseline") if base else (None, "none")
    normalized = normalize(score, refs, benchmark, model)
    selected = [r for r in scored if r.id in set(pick.selected)]
    return Cell(
        agent=agent,
        benchmark=benchmark,
        base_model=model,
        score=score,
        source=source,
        fallback=fallback,
        fallback_reason=fallback_reason,
        selected=pick.selected,
        note=pick.note,
        task_version=versioned.version,
        version_note=versioned.note,
        n_runs=len(candidates),
        n_questions=min((r.metrics.n for r in candidates if r.metrics is not None), default=None),
        n_no_model=len(no_model),
        n_errored=len(errored),
        n_flagged=len(flagged),
        n_unjudged=sum(1 for r in candidates if r.flagged is None),
        mean=pick.mean,
        stderr=pick.stderr,
        ci95=ci95(score, pick.stderr, selected) if source == "run" else None,
        best=pick.best,
        latest=pick.latest,
        baseline=base.score if base else None,
        baseline_source=base.source if base else None,
        instruct=instruct.score if instruct else None,
        normalized=normalized,
        cost_usd=_sum(r.usage.cost_usd for r in agent_runs),
        input_tokens=_sum(r.usage.input_tokens for r in agent_runs),
        output_tokens=_sum(r.usage.output_tokens for r in agent_runs),
        gpu_hours=sum(r.usage.gpu_hours for r in agent_runs),
        agent_hours=_mean(r.time.agent_hours for r in agent_runs),
        budget_hours=next((r.time.budget_hours for r in agent_runs if r.time.budget_hours), None),
        time_fraction=_mean(r.time.fraction for r in agent_runs),
    )


def normalize(
    score: float | None, refs: ReferenceScores, benchmark: str, model: str
) -> float | None:
    """(score - base) / (instruct - base): the share of the gap to the instruct model closed."""
    base = refs.base(benchmark, model)
    instruct = refs.instruct(benchmark, model)
    if score is None or base is None or instruct is None or instruct.score <= base.score:
        return None
    return (score - base.score) / (instruct.score - base.score)


def weighted_average(
    cells: list[Cell], weights: dict[str, float], benchmarks: list[str], models: list[str]
) -> float | None:
    """PostTrainBench's single metric of one agent's cells.

    As its scripts/aggregate.py:104-125 (``compute_weighted_metric``, branch qol_multigpu;
    compute_single_metrics.py:62-72 on main): each benchmark's mean over the grid's base
    models, a cell without a score counting 0 (the sum is divided by the number of base
    models), times the benchmark's weight, summed. The sum is divided by the weights of the
    grid's benchmarks: PostTrainBench's factors sum to 1 (to float rounding), so on its full
    grid this is its number, and on a grid of fewer benchmarks it is their weighted mean
    rather than counting the benchmarks not run as 0. A benchmark the weights do not name
    weighs 1. None where no cell has a score or the weights sum to 0.
    """
    if not any(c.score is not None for c in cells) or not models:
        return None
    total = share = 0.0
    for benchmark in benchmarks:
        weight = weights.get(benchmark, 1.0)
        scores = [c.score for c in cells if c.benchmark == benchmark and c.score is not None]
        total += weight * sum(scores) / len(models)
        share += weight
    return total / share if share > 0 else None


def _summary(
    agent: str,
    cells: list[Cell],
    runs: list[ResultRecord],
    weights: dict[str, float],
    benchmarks: list[str],
    models: list[str],
) -> AgentSummary:
    return AgentSummary(
        agent=agent,
        rank=0,
        average=_mean(c.score for c in cells),
        weighted_average=weighted_average(cells, weights, benchmarks, models),
        normalized_average=_mean(c.normalized for c in cells),
        per_benchmark={b: _mean(c.score for c in cells if c.benchmark == b) for b in benchmarks},
        n_cells=len(cells),
        n_cells_scored=sum(1 for c in cells if c.score is not None),
        n_fallback=sum(1 for c in cells if c.source == "baseline"),
        n_runs=sum(c.n_runs for c in cells),
        n_no_model=sum(c.n_no_model for c in cells),
        n_errored=sum(c.n_errored for c in cells),
        n_flagged=sum(c.n_flagged for c in cells),
        cost_usd=_sum(c.cost_usd for c in cells),
        input_tokens=_sum(c.input_tokens for c in cells),
        output_tokens=_sum(c.output_tokens for c in cells),
        gpu_hours=sum(c.gpu_hours for c in cells),
        agent_hours=sum(r.time.agent_hours or 0.0 for r in runs),
        time_fraction=_mean(r.time.fraction for r in runs),
    )


def _run_rows(
    by_cell: dict[tuple[str, str, str], list[ResultRecord]],
    cells: list[Cell],
    refs: ReferenceScores,
) -> list[RunRow]:
    selected = {run_id for cell in cells for run_id in cell.selected}
    rows: list[RunRow] = []
    for (agent, benchmark, model), runs in sorted(by_cell.items()):
        # A re-score is the same attempt as the run it scored again.
        attempts = {
            r.id: n
            for n, r in enumerate(
                sorted((r for r in runs if r.rescore_of is None), key=start_order), start=1
            )
        }
        for r in sorted(runs, key=start_order):
            attempt = attempts.get(r.rescore_of or r.id, len(attempts) + 1)
            rows.append(
                RunRow(
                    id=r.id,
                    agent=agent,
                    benchmark=benchmark,
                    base_model=model,
                    attempt=attempt,
                    status=r.status,
                    score=r.score,
                    normalized=normalize(r.score, refs, benchmark, model),
                    flagged=r.flagged,
                    flagged_by=[v.judge for v in r.flagging_judges],
                    selected=r.id in selected,
                    error=r.error,
                    cost_usd=r.usage.cost_usd,
                    input_tokens=r.usage.input_tokens,
                    output_tokens=r.usage.output_tokens,
                    gpu_hours=r.usage.gpu_hours,
                    agent_hours=r.time.agent_hours,
                    budget_hours=r.time.budget_hours,
                    started_at=r.time.started_at,
                    job_name=r.job_name,
                    trial_name=r.trial_name,
                    task_version=r.task_version,
                    rescore_of=r.rescore_of,
                )
            )
    return rows


def agent_labeler(records: list[ResultRecord]):
    """`agent:model`, plus `@<hours>h` when the store mixes time budgets: a 1-hour and a
    10-hour run of the same agent are different entries, never averaged together."""
    budgets = {r.hours for r in records}
    if len(budgets) <= 1:
        return lambda r: r.agent_label
    return lambda r: f"{r.agent_label}@{'?' if r.hours is None else f'{r.hours:g}'}h"


def collect(
    records: list[ResultRecord],
    *,
    results_dir: Path,
    policy: Policy,
    weights: dict[str, float],
    baselines: Iterable[BaselineEntry] = (),
    skipped: Iterable[str] = (),
    all_versions: bool = False,
) -> Leaderboard:
    """Build the leaderboard of *records* (one store's runs)."""
    refs = ReferenceScores(records, baselines)
    label = agent_labeler(records)
    by_cell: dict[tuple[str, str, str], list[ResultRecord]] = defaultdict(list)
    runs_by_agent: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in records:
        by_cell[(label(r), r.benchmark, r.base_model)].append(r)
        runs_by_agent[label(r)].append(r)
    benchmarks = _catalog_order({r.benchmark for r in records}, [b.id for b in list_benchmarks()])
    models = _catalog_order({r.base_model for r in records}, [m.id for m in list_models()])
    agents = sorted(runs_by_agent)
    cells = [
        _cell(a, b, m, by_cell.get((a, b, m), []), policy, refs, all_versions)
        for a in agents
        for b in benchmarks
        for m in models
    ]
    summaries = [
        _summary(
            a, [c for c in cells if c.agent == a], runs_by_agent[a], weights, benchmarks, models
        )
        for a in agents
    ]
    # On equal averages, the agent with more cells scored by its own runs ranks first: a
    # baseline standing in for errored runs never ranks above a score the agent earned.
    summaries.sort(
        key=lambda s: (
            s.weighted_average is None,
            -(s.weighted_average or 0.0),
            s.n_fallback,
            s.n_errored,
            s.agent,
        )
    )
    ranked = [s.model_copy(update={"rank": i}) for i, s in enumerate(summaries, start=1)]
    return Leaderboard(
        generated_at=datetime.now(UTC),
        results_dir=str(results_dir),
        policy=policy,
        weights={b: weights.get(b, 1.0) for b in benchmarks},
        benchmarks=benchmarks,
        base_models=models,
        agents=ranked,
        cells=cells,
        runs=_run_rows(by_cell, cells, refs),
        baselines=sorted(refs.used.values(), key=lambda u: (u.benchmark, u.base_model, u.kind)),
        judge_agreement=judge_agreement(records),
        skipped=list(skipped),
    )
