"""Mode A's trusted scorer: run the candidate's entry command on the questions, score its
answers against the service's own dataset copy.

The scorer is this module, in the service's process. Nothing from the candidate's copy is
imported; the copy only provides the command's working directory, and the command only
sees questions (never answers) on stdin. Each run is contained (``candidate_run``).
"""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from posttrainbench.service.shared.candidate_run import (
    CodeRefused,
    RunOutcome,
    contained_run,
    run_command,
    unpack,
)
from posttrainbench.service.shared.candidates import ArchiveSource
from posttrainbench.service.shared.config import CandidateLimits, ScoringModeA, Timeouts
from posttrainbench.service.shared.dataset import Sample
from posttrainbench.service.shared.identity import ContainmentError, IdentityPool
from posttrainbench.service.shared.runas import candidate_env

_NUMBER_NOISE = re.compile(r"[,$\s]")


class SampleResult(BaseModel):
    """One scored sample."""

    model_config = ConfigDict(extra="forbid")

    id: str
    prediction: str | None
    expected: str
    correct: bool


class ScoreReport(BaseModel):
    """One run of a candidate over some samples."""

    model_config = ConfigDict(extra="forbid")

    n: int
    correct: int
    mean: float
    status: Literal["ok", "timeout", "error", "limit"]
    exit_code: int | None
    duration_s: float
    samples: list[SampleResult]
    stderr_tail: str
    reason: str | None = None


def normalize_answer(text: str) -> str:
    """Numbers compare by value ("1,000" == "1000.0"); other text by trimmed lower case."""
    plain = text.strip().lower()
    numeric = _NUMBER_NOISE.sub("", plain).rstrip(".")
    try:
        value = Decimal(numeric)
    except InvalidOperation:
        return " ".join(plain.split())
    if not value.is_finite():
        return " ".join(plain.split())
    return "0" if value == 0 else format(value.normalize(), "f")


def parse_answers(stdout: str) -> dict[str, str]:
    """``{"id", "answer"}`` JSON lines; other lines are ignored and the first answer per id wins."""
    answers: dict[str, str] = {}
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "id" in item and item.get("answer") is not None:
            answers.setdefault(str(item["id"]), str(item["answer"]))
    return answers


def score_answers(samples: list[Sample], answers: dict[str, str]) -> list[SampleResult]:
    """Exact match after normalisation; a missing answer is wrong."""
    results = []
    for sample in samples:
        prediction = answers.get(sample.id)
        correct = prediction is not None and normalize_answer(prediction) == normalize_answer(
            sample.answer
        )
        results.append(
            SampleResult(
                id=sample.id, prediction=prediction, expected=sample.answer, correct=correct
            )
        )
    return results


def score_copy(
    source: ArchiveSource,
    samples: list[Sample],
    scoring: ScoringModeA,
    timeouts: Timeouts,
    limits: CandidateLimits,
    pool: IdentityPool,
    runs_root: Path,
) -> ScoreReport:
    """Score the code *source* yields, in one contained run (fresh uid, own directory, see
    ``candidate_run``); code that cannot be unpacked scores 0 with status ``limit``."""
    questions = "".join(json.dumps({"id": s.id, "question": s.question}) + "\n" for s in samples)
    start = time.monotonic()
    try:
        with contained_run(pool, runs_root) as (identity, run):
            try:
                unpack(source, run.code, identity, limits)
            except CodeRefused as exc:
                outcome = RunOutcome("", "", "limit", None, str(exc))
            else:
                outcome = run_command(
                    identity,
                    run,
                    scoring.argv(),
                    candidate_env(scoring, run),
                    questions.encode(),
                    timeouts.for_samples(len(samples)),
                    limits,
                )
    except ContainmentError as exc:  # its processes would not die: nothing it printed counts
        outcome = RunOutcome("", "", "limit", None, str(exc))
    results = score_answers(samples, parse_answers(outcome.stdout))
    correct = sum(r.correct for r in results)
    return ScoreReport(
        n=len(samples),
        correct=correct,
        mean=correct / len(samples) if samples else 0.0,
        status=outcome.status,
        exit_code=outcome.exit_code,
        duration_s=round(time.monotonic() - start, 3),
        samples=results,
        stderr_tail=outcome.stderr_tail,
        reason=outcome.reason,
    )
