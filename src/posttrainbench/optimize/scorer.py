"""Mode A's trusted scorer: run the candidate's entry command on the questions, score its
answers against the service's own dataset copy.

The scorer is this module, in the service's process. Nothing from the candidate's copy is
imported; the copy only provides the command's working directory, and the command only
sees questions (never answers) on stdin.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from posttrainbench.optimize.config import ScoringModeA, Timeouts
from posttrainbench.optimize.dataset import Sample
from posttrainbench.optimize.runas import CandidateUser, candidate_env

_STDERR_TAIL = 4000
_NUMBER_NOISE = re.compile(r"[,$\s]")


class SampleResult(BaseModel):
    """One scored sample."""

    model_config = ConfigDict(extra="forbid")

    id: str
    prediction: Optional[str]
    expected: str
    correct: bool


class ScoreReport(BaseModel):
    """One run of a candidate over some samples."""

    model_config = ConfigDict(extra="forbid")

    n: int
    correct: int
    mean: float
    status: Literal["ok", "timeout", "error"]
    exit_code: Optional[int]
    duration_s: float
    samples: list[SampleResult]
    stderr_tail: str


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
        correct = prediction is not None and normalize_answer(prediction) == normalize_answer(sample.answer)
        results.append(SampleResult(id=sample.id, prediction=prediction, expected=sample.answer, correct=correct))
    return results


def _run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str, timeout_s: float) -> tuple[str, str, str, Optional[int]]:
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # own group: killed whole
    try:
        out, err = proc.communicate(stdin.encode(), timeout=timeout_s)
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), \
            ("ok" if proc.returncode == 0 else "error"), proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
            proc.kill()
            out, err = b"", b""
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), "timeout", None


def score_directory(code_dir: Path, samples: list[Sample], scoring: ScoringModeA, timeouts: Timeouts,
                    user: CandidateUser) -> ScoreReport:
    """Run the entry command in *code_dir* (already owned by *user*) and score its answers."""
    questions = "".join(json.dumps({"id": s.id, "question": s.question}) + "\n" for s in samples)
    start = time.monotonic()
    try:
        out, err, status, code = _run(user.wrap(scoring.argv()), code_dir, candidate_env(scoring, code_dir),
                                      questions, timeouts.for_samples(len(samples)))
    except OSError as exc:  # e.g. the command does not exist
        out, err, status, code = "", f"cannot start {scoring.entry_command!r}: {exc.strerror}", "error", None
    results = score_answers(samples, parse_answers(out))
    correct = sum(r.correct for r in results)
    return ScoreReport(n=len(samples), correct=correct, mean=correct / len(samples) if samples else 0.0,
                       status=status, exit_code=code, duration_s=round(time.monotonic() - start, 3),
                       samples=results, stderr_tail=err[-_STDERR_TAIL:])


def score_copy(export: Callable[[Path], object], samples: list[Sample], scoring: ScoringModeA, timeouts: Timeouts,
               user: CandidateUser, work_dir: Optional[Path] = None) -> ScoreReport:
    """Export a fresh copy with *export(dest)*, hand it to *user*, score it, then delete it."""
    scratch = Path(tempfile.mkdtemp(prefix="ptb-candidate-", dir=work_dir))
    try:
        code_dir = scratch / "code"
        export(code_dir)
        user.hand_over(scratch)
        return score_directory(code_dir, samples, scoring, timeouts, user)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
