"""HealthBench as a sandbox :class:`Benchmark`: rubric grading by an LLM grader, as
PostTrainBench's ``src/eval/tasks/healthbench/`` (see :mod:`.grading`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..base import (
    ContaminationText,
    GenerationSettings,
    Message,
    Sample,
    ScoreResult,
    messages_text,
)
from ..judge_guard import InjectionFinding, finding_labels
from ..judged import JudgedBenchmark
from ..llm_judge import (
    JudgeConfigError,
    MissingRecordingError,
    parallel_map,
    raise_systemic,
)
from .grading import (
    GradedResponse,
    bootstrap_stderr,
    grader_messages,
    injection_in,
    model_answer,
    parse_grade,
    rubric_score,
)

DEFAULT_GRADER = (
    "gpt-5-mini"  # PostTrainBench's JUDGE_MODEL (evaluate.py:44); PTB_JUDGE_MODEL overrides
)
# grader.py:191-203: reasoning models get no temperature and 49152 completion tokens
# (litellm sends max_tokens as max_completion_tokens to them), others temperature 0, 512.
REASONING_GRADER_MARKERS = ("gpt-5", "o1", "o3")
REASONING_MAX_TOKENS = 49152
GRADER_TEMPERATURE = 0.0
GRADER_MAX_TOKENS = 512
MAX_GRADE_ATTEMPTS = 5  # grader.py:99, API_MAX_RETRY: unparseable replies and failed calls alike
RETRY_SLEEP_S = 2.0  # grader.py:100,231: after failed call n (from 0), sleep (n + 1) x this


def grader_settings(model: str) -> tuple[float | None, int]:
    """(temperature, max tokens) of PostTrainBench's request to *model* (None: not sent)."""
    if any(marker in model for marker in REASONING_GRADER_MARKERS):
        return None, REASONING_MAX_TOKENS
    return GRADER_TEMPERATURE, GRADER_MAX_TOKENS


class HealthBench(JudgedBenchmark):
    """HealthBench conversations; score = rubric points earned / positive points (may be < 0);
    the benchmark score is the mean clipped to [0, 1].

    The test split is in PostTrainBench's order (:mod:`.source`: its file shuffled by
    ``random.Random(42)``, evaluate.py:324-327), so ``load(split, N)``'s first N are the
    conversations its ``--limit N`` grades."""

    id = "healthbench"
    name = "HealthBench"
    # Greedy, 1024 new tokens: room for a full, careful answer to a health question.
    # (The posttrainbench variant's cap is its plugin.json's: evaluate.py's 16384.)
    generation = GenerationSettings(max_new_tokens=1024, temperature=0.0)
    default_judge_model = DEFAULT_GRADER

    def build_messages(self, sample: Sample) -> list[Message]:
        # The conversation as it is (evaluate.py:210); the model writes the next assistant turn.
        return [dict(m) for m in sample.data["prompt"]]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=messages_text(data["prompt"]))

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        return self.score_batch([sample], [completion])[0]

    def aggregate_scores(self, results: Sequence[ScoreResult]) -> dict[str, float] | None:
        """PostTrainBench's accuracy (the clipped mean of the unclipped example scores) and
        stderr (its bootstrap, ``scoring.py:55-97``)."""
        scores = [r.score for r in results]
        mean = sum(scores) / len(scores) if scores else 0.0
        return {"accuracy": min(1.0, max(0.0, mean)), "stderr": bootstrap_stderr(scores)}

    def score_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[ScoreResult]:
        return [result for _, result in self.grade_batch(samples, completions)]

    def grade_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[tuple[GradedResponse, ScoreResult]]:
        """Grade every (response, criterion) pair in parallel, then score each response.

        The :class:`GradedResponse` s are what :func:`.grading.ptb_metrics` takes. A
        response carrying grader-directed content scores 0 without a grader call.
        """
        responses = [model_answer(c) for c in completions]
        injected = {
            i: injection_in(responses[i], [r["criterion"] for r in s.data["rubrics"]])
            for i, s in enumerate(samples)
        }
        items = [
            (i, j)
            for i, s in enumerate(samples)
            if not injected[i]
            for j in range(len(s.data["rubrics"]))
        ]
        grader = self.judge() if items else None
        temperature, max_tokens = grader_settings(grader.model) if grader else (None, 0)

        def grade(item: tuple[int, int]) -> bool | None:
            i, j = item
            assert grader is not None
            rubric = samples[i].data["rubrics"][j]
            request = grader_messages(
                samples[i].data["prompt"], responses[i], rubric["criterion"], rubric["points"]
            )
            error: Exception | None = None
            replies = 0
            for attempt in range(MAX_GRADE_ATTEMPTS):
                try:
                    reply = grader.complete(
                        request,
                        temperature=temperature,  # None: not sent
                        max_tokens=max_tokens,
                    )
                except (JudgeConfigError, MissingRecordingError):
                    raise
                except Exception as exc:  # grader.py:227-231: retried like a bad reply
                    error = exc
                    if attempt < MAX_GRADE_ATTEMPTS - 1:
                        time.sleep(RETRY_SLEEP_S * (attempt + 1))
                    continue
                replies += 1
                verdict = parse_grade(reply, responses[i])
                if verdict is not None:
                    return verdict
            if error is not None and not replies:
                raise error  # every call failed: raise_systemic tells a dead grader
            return None

        outcomes = parallel_map(grade, items)
        raise_systemic(outcomes)
        verdicts: dict[int, list[bool | None | BaseException]] = {
            i: [] for i in range(len(samples))
        }
        for (i, _), outcome in zip(items, outcomes):
            verdicts[i].append(outcome)
        return [
            _injected(injected[i]) if injected[i] else _result(s, verdicts[i])
            for i, s in enumerate(samples)
        ]


def _injected(findings: list[InjectionFinding]) -> tuple[GradedResponse, ScoreResult]:
    """0 for a response that addresses the grader, with what it carried."""
    evidence = "; ".join(f"{f.kind}: {f.evidence!r}" for f in findings)
    return GradedResponse(0.0), ScoreResult(
        0.0, "judge_injection", f"not graded, scored 0: {evidence}", finding_labels(findings)
    )


def _result(
    sample: Sample, verdicts: list[bool | None | BaseException]
) -> tuple[GradedResponse, ScoreResult]:
    """Score one response; a criterion the grader could not grade counts as not met
    (``grader.py:309-316``) and is reported."""
    rubrics = sample.data["rubrics"]
    met = [v is True for v in verdicts]
    failed = sum(not isinstance(v, bool) for v in verdicts)
    result = rubric_score([r["points"] for r in rubrics], met)
    detail = (
        f"{sum(met)}/{len(rubrics)} criteria met, {result.achieved:g}/{result.possible:g} points, "
        f"score {result.raw:.4f}"
    )
    graded = GradedResponse(result.raw, tuple(met))
    if failed == len(rubrics):
        return graded, ScoreResult(
            result.raw, "grader_failed", f"{detail}; no criterion could be graded"
        )
    if failed:
        return graded, ScoreResult(
            result.raw,
            "grader_unparseable",
            f"{detail}; {failed} criteria not graded, counted as not met",
        )
    return graded, ScoreResult(result.raw, None, detail)
