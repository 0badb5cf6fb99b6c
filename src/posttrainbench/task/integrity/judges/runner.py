"""Run the judges over one run and write ``judgement_<id>.json`` for each.

Every judge is isolated: one that raises gets an error judgement (or its override) and
the others still run. With caps (:class:`JudgeLimits`, the default) each judge runs in a
child process of its own (:mod:`isolation`), side by side, and one that outlives its
time cap is killed with everything it started and judged *incomplete*, never clean.
Before any judge starts, each judgement file is replaced by an *incomplete* placeholder,
so a file planted earlier never stands as a verdict and a run killed from outside leaves
no clean verdict behind. Each judgement is written as soon as it is decided.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

from posttrainbench.core.verdict import JUDGE_IDS, Judgement, LimitHit, Override
from posttrainbench.task.integrity.judges.anomaly import detect_anomaly
from posttrainbench.task.integrity.judges.api_usage import detect_api_usage
from posttrainbench.task.integrity.judges.benchmark_lookup import detect_benchmark_lookup
from posttrainbench.task.integrity.judges.contamination import detect_contamination
from posttrainbench.task.integrity.judges.detection import Detection
from posttrainbench.task.integrity.judges.disallowed_model import detect_disallowed_model
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputError
from posttrainbench.task.integrity.judges.isolation import run_side_by_side
from posttrainbench.task.integrity.judges.limits import JudgeLimits
from posttrainbench.task.integrity.judges.llm_review import run_review
from posttrainbench.task.integrity.judges.precedence import decide

Detector = Callable[[JudgeContext], Detection]

DETECTORS: dict[str, Detector] = {
    "contamination": detect_contamination,
    "disallowed_model": detect_disallowed_model,
    "api_usage": detect_api_usage,
    "benchmark_lookup": detect_benchmark_lookup,
    "anomaly": detect_anomaly,
}


def parse_judge_ids(text: str | None) -> list[str]:
    """'a,b' -> ['a', 'b'] (all judges for None or empty); unknown ids are an error."""
    if not text or not text.strip():
        return list(JUDGE_IDS)
    ids = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [i for i in ids if i not in DETECTORS]
    if unknown:
        raise JudgeInputError(
            f"unknown judge(s) {', '.join(unknown)}; known: {', '.join(JUDGE_IDS)}"
        )
    return ids


def run_judge(
    judge: str,
    ctx: JudgeContext,
    llm_votes: int,
    override: Override | None,
    client=None,
    detectors: dict[str, Detector] | None = None,
) -> Judgement:
    """One judge: its detectors, the optional LLM review, then the precedence rules."""
    detection = review = None
    try:
        detection = (detectors or DETECTORS)[judge](ctx)
        if override is None:
            # Also when a detector flags: it decides, but the votes complete the record.
            review = run_review(judge, ctx, detection, llm_votes, client)
        return decide(judge, detection, review, override, limits=ctx.incomplete)
    except Exception as exc:  # isolate: a crash becomes this judge's verdict
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return decide(judge, detection, review, override, error=detail, limits=ctx.incomplete)


def not_finished(judge: str, override: Override | None, detail: str) -> Judgement:
    """The verdict of a judge stopped by its time cap (or not yet finished)."""
    return decide(
        judge,
        None,
        None,
        override,
        limits=[LimitHit(cap="time", check=f"the {judge} judge", detail=detail)],
    )


def run_judges(
    ctx: JudgeContext,
    out_dir: Path,
    judges: list[str] | None = None,
    llm_votes: int = 1,
    overrides: dict[str, Override] | None = None,
    client=None,
    detectors: dict[str, Detector] | None = None,
    limits: JudgeLimits | None = None,
    isolate: bool = True,
) -> list[Judgement]:
    """Run *judges* (default all) under *limits* (default :class:`JudgeLimits`), writing each
    judgement into *out_dir*; return them in the order asked.

    ``isolate=False`` runs them one after the other in this process, without time caps
    (byte caps still hold); only for tests that inspect in-process state.
    """
    ids = judges or list(JUDGE_IDS)
    limits = limits or JudgeLimits()
    overrides = overrides or {}
    for judge in ids:  # placeholders first: nothing planted or stale survives as a verdict
        not_finished(judge, overrides.get(judge), "started, not finished").write(out_dir)

    caps = {judge: min(limits.of(judge).time_s, limits.total_time_s) for judge in ids}

    def one(judge: str) -> Judgement:
        ctx.start_judge(limits.of(judge).max_bytes, caps[judge] if isolate else None)
        return run_judge(judge, ctx, llm_votes, overrides.get(judge), client, detectors)

    done: dict[str, Judgement] = {}

    def record(judge: str, judgement: Judgement) -> None:
        judgement.write(out_dir)
        done[judge] = judgement

    if not isolate:
        for judge in ids:
            record(judge, one(judge))
    else:
        for judge, outcome in run_side_by_side(
            {judge: (lambda j=judge: one(j)) for judge in ids}, caps, Judgement
        ):
            if isinstance(outcome, Judgement):
                record(judge, outcome)
            elif outcome.timed_out:
                record(
                    judge,
                    not_finished(
                        judge,
                        overrides.get(judge),
                        f"still running after {caps[judge]:.0f} s; stopped with all it started",
                    ),
                )
            else:
                record(judge, decide(judge, None, None, overrides.get(judge), error=outcome.error))
    return [done[judge] for judge in ids]
