"""Mode B's per-task scores from the trials of a nested Harbor job.

A trial *counts* when its outcome (``posttrainbench.core.trial_outcome``) is ``completed``:
Harbor wrote its ``result.json`` with a valid reward under the configured key; everything
else (an exception without a valid reward, a trial cancelled by the nested-run timeout,
no ``result.json`` yet) does not. A resume runs again only what that module's retry policy
retries (infrastructure and verifier failures); an agent's own error stays, as in
``ptb sweep``, so a candidate gets no attempts beyond ``n_attempts``. Per task, ``best`` keeps the
trial with the highest reward and, among equals, the most recent ``finished_at``;
``mean`` averages the rewards of all ``n_attempts`` attempts, an attempt that did not
count scoring 0. A task without a counted trial scores 0 and is reported missing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.trial_outcome import HarborTrial, TrialOutcome, classify
from posttrainbench.service.mode_a.scorer import SampleResult, ScoreReport

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class NestedTrial(BaseModel):
    """One trial directory of the nested job and its outcome, as far as scoring cares."""

    model_config = ConfigDict(extra="forbid")

    trial_dir: Path
    trial_name: str
    task_name: str
    outcome: TrialOutcome
    finished_at: datetime | None

    @property
    def reward(self) -> float | None:
        """The reward of a trial that counts; None for one that does not."""
        return self.outcome.reward if self.outcome.kind == "completed" else None

    @property
    def error(self) -> str | None:
        """Why a trial does not count."""
        return None if self.outcome.kind == "completed" else self.outcome.reason


class TaskSampleResult(SampleResult):
    """One Mode B sample: a task, its score and how many of its trials counted."""

    score: float
    trials: int
    status: Literal["scored", "missing"]
    chosen_trial: str | None = None


class NestedScoreReport(ScoreReport):
    """A Mode A-shaped report (per-sample list + mean) with the tasks that got no score."""

    samples: list[TaskSampleResult]  # type: ignore[assignment]
    missing: list[str]


def read_trial(trial_dir: Path, reward_key: str) -> NestedTrial | None:
    """One trial directory; None while it has no readable ``result.json``. Harbor wrote it in
    the trusted child (the candidate cannot reach ``jobs/``); the nested tasks are any
    Harbor tasks, with no PostTrainBench ``metrics.json`` to read."""
    try:
        raw = json.loads((trial_dir / "result.json").read_text(encoding="utf-8"))
        facts = HarborTrial.model_validate(raw)
        outcome = classify(raw, reward_key=reward_key)
    except (OSError, ValueError):
        return None
    return NestedTrial(
        trial_dir=trial_dir,
        trial_name=facts.trial_name,
        task_name=facts.task_name,
        outcome=outcome,
        finished_at=facts.finished_at,
    )


def read_trials(job_dir: Path, reward_key: str) -> list[NestedTrial]:
    """Every trial of one Harbor job directory with a readable ``result.json``."""
    if not Path(job_dir).is_dir():
        return []
    trials = (read_trial(p, reward_key) for p in sorted(Path(job_dir).iterdir()) if p.is_dir())
    return [t for t in trials if t is not None]


def trials_to_retry(job_dir: Path, reward_key: str) -> list[Path]:
    """Trials whose outcome the retry policy runs again (infrastructure or verifier failures,
    unfinished trials): a resume retires them and Harbor runs them again."""
    return [t.trial_dir for t in read_trials(job_dir, reward_key) if t.outcome.retried]


def best_trial(outcomes: list[NestedTrial]) -> NestedTrial | None:
    """The counted trial with the highest reward; among equal rewards the most recent one."""
    counted = [o for o in outcomes if o.reward is not None]
    if not counted:
        return None
    return max(counted, key=lambda o: (o.reward, _aware(o.finished_at)))


def _aware(moment: datetime | None) -> datetime:
    if moment is None:
        return _EPOCH
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def score_tasks(
    names: list[str],
    outcomes: list[NestedTrial],
    aggregation: Literal["best", "mean"],
    n_attempts: int,
) -> list[TaskSampleResult]:
    """One result per task name, in *names*' order; trials of other names are ignored (exact match)."""
    by_task: dict[str, list[NestedTrial]] = {name: [] for name in names}
    for outcome in outcomes:
        if outcome.task_name in by_task:
            by_task[outcome.task_name].append(outcome)
    results = []
    for name in names:
        trials = by_task[name]
        counted = [t for t in trials if t.reward is not None]
        best = best_trial(trials)
        if aggregation == "mean":
            # The most recent counted attempts, at most n_attempts (a resumed run never adds more).
            recent = sorted(counted, key=lambda t: _aware(t.finished_at), reverse=True)[:n_attempts]
            score = sum(t.reward for t in recent if t.reward is not None) / n_attempts
        else:
            score = best.reward if best is not None and best.reward is not None else 0.0
        results.append(
            TaskSampleResult(
                id=name,
                prediction=None if best is None else f"{score:g}",
                expected="1",
                correct=score >= 1.0,
                score=score,
                trials=len(counted),
                status="scored" if counted else "missing",
                chosen_trial=best.trial_name
                if best is not None and aggregation == "best"
                else None,
            )
        )
    return results


def build_report(
    names: list[str],
    outcomes: list[NestedTrial],
    aggregation: Literal["best", "mean"],
    n_attempts: int,
    status: Literal["ok", "timeout", "error"],
    exit_code: int | None,
    duration_s: float,
    stderr_tail: str,
) -> NestedScoreReport:
    """The Mode A-shaped report over *names*: mean of the per-task scores, missing tasks at 0."""
    samples = score_tasks(names, outcomes, aggregation, n_attempts)
    mean = sum(s.score for s in samples) / len(samples) if samples else 0.0
    return NestedScoreReport(
        n=len(samples),
        correct=sum(s.correct for s in samples),
        mean=mean,
        status=status,
        exit_code=exit_code,
        duration_s=duration_s,
        samples=samples,
        stderr_tail=stderr_tail,
        missing=[s.id for s in samples if s.status == "missing"],
    )
