"""Run the judges over one run and write ``judgement_<id>.json`` for each.

Every judge is isolated: one that raises gets an error judgement (or its override) and
the others still run. Each judgement is written as soon as it is decided, so a run cut
short by a timeout keeps what was finished.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Callable, Optional

from posttrainbench.integrity.judges.anomaly import detect_anomaly
from posttrainbench.integrity.judges.api_usage import detect_api_usage
from posttrainbench.integrity.judges.benchmark_lookup import detect_benchmark_lookup
from posttrainbench.integrity.judges.contamination import detect_contamination
from posttrainbench.integrity.judges.detection import Detection
from posttrainbench.integrity.judges.disallowed_model import detect_disallowed_model
from posttrainbench.integrity.judges.inputs import JudgeContext, JudgeInputError
from posttrainbench.integrity.judges.llm_review import run_review
from posttrainbench.integrity.judges.precedence import decide
from posttrainbench.integrity.judges.verdict import JUDGE_IDS, Judgement, Override

Detector = Callable[[JudgeContext], Detection]

DETECTORS: dict[str, Detector] = {
    "contamination": detect_contamination,
    "disallowed_model": detect_disallowed_model,
    "api_usage": detect_api_usage,
    "benchmark_lookup": detect_benchmark_lookup,
    "anomaly": detect_anomaly,
}


def parse_judge_ids(text: Optional[str]) -> list[str]:
    """'a,b' -> ['a', 'b'] (all judges for None or empty); unknown ids are an error."""
    if not text or not text.strip():
        return list(JUDGE_IDS)
    ids = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [i for i in ids if i not in DETECTORS]
    if unknown:
        raise JudgeInputError(f"unknown judge(s) {', '.join(unknown)}; known: {', '.join(JUDGE_IDS)}")
    return ids


def run_judge(judge: str, ctx: JudgeContext, llm_votes: int, override: Optional[Override],
              client=None, detectors: Optional[dict[str, Detector]] = None) -> Judgement:
    """One judge: its detectors, the optional LLM review, then the precedence rules."""
    detection = review = None
    try:
        detection = (detectors or DETECTORS)[judge](ctx)
        if override is None:
            # Also when a detector flags: it decides, but the votes complete the record.
            review = run_review(judge, ctx, detection, llm_votes, client)
        return decide(judge, detection, review, override)
    except Exception as exc:  # isolate: a crash becomes this judge's verdict
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return decide(judge, detection, review, override, error=detail)


def run_judges(ctx: JudgeContext, out_dir: Path, judges: Optional[list[str]] = None, llm_votes: int = 1,
               overrides: Optional[dict[str, Override]] = None, client=None,
               detectors: Optional[dict[str, Detector]] = None) -> list[Judgement]:
    """Run *judges* (default all), writing each judgement into *out_dir*; return them."""
    results = []
    for judge in judges or list(JUDGE_IDS):
        judgement = run_judge(judge, ctx, llm_votes, (overrides or {}).get(judge), client, detectors)
        judgement.write(out_dir)
        results.append(judgement)
    return results
