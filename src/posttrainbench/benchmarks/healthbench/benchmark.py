"""HealthBench as a sandbox :class:`Benchmark`: rubric grading by an LLM grader."""

from __future__ import annotations

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
from ..llm_judge import parallel_map, raise_systemic, strip_thinking
from .grading import grader_messages, injection_in, parse_grade, rubric_score

DEFAULT_GRADER = (
    "gpt-4.1"  # simple-evals grades HealthBench with gpt-4.1; PTB_JUDGE_MODEL overrides
)
# Deterministic grading (simple-evals samples its grader at 0.5): the same response
# gets the same score in the agent's evaluate.py and in the final evaluation.
GRADER_TEMPERATURE = 0.0
GRADER_MAX_TOKENS = 2048  # simple-evals' grader budget
MAX_GRADE_ATTEMPTS = 3  # re-ask when a reply has no parseable criteria_met


class HealthBench(JudgedBenchmark):
    """500 health conversations; score = rubric points earned / positive points, in [0, 1]."""

    id = "healthbench"
    name = "HealthBench"
    # Greedy, 1024 new tokens: room for a full, careful answer to a health question.
    generation = GenerationSettings(max_new_tokens=1024, temperature=0.0)
    default_judge_model = DEFAULT_GRADER

    def build_messages(self, sample: Sample) -> list[Message]:
        # Multi-turn conversations are passed through as they are; the model writes the
        # next assistant turn.
        return [dict(m) for m in sample.data["prompt"]]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=messages_text(data["prompt"]))

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        return self.score_batch([sample], [completion])[0]

    def score_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[ScoreResult]:
        """Grade every (response, criterion) pair in parallel, then score each response.

        A response carrying grader-directed content scores 0 without a grader call.
        """
        responses = [strip_thinking(c) for c in completions]
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

        def grade(item: tuple[int, int]) -> bool | None:
            i, j = item
            assert grader is not None
            request = grader_messages(
                samples[i].data["prompt"], responses[i], samples[i].data["rubrics"][j]["criterion"]
            )
            for _ in range(MAX_GRADE_ATTEMPTS):
                verdict = parse_grade(
                    grader.complete(
                        request, temperature=GRADER_TEMPERATURE, max_tokens=GRADER_MAX_TOKENS
                    ),
                    responses[i],
                )
                if verdict is not None:
                    return verdict
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


def _injected(findings: list[InjectionFinding]) -> ScoreResult:
    """0 for a response that addresses the grader, with what it carried."""
    evidence = "; ".join(f"{f.kind}: {f.evidence!r}" for f in findings)
    return ScoreResult(
        0.0, "judge_injection", f"not graded, scored 0: {evidence}", finding_labels(findings)
    )


def _result(sample: Sample, verdicts: list[bool | None | BaseException]) -> ScoreResult:
    """Score one response; criteria the grader could not grade are left out and reported."""
    rubrics = sample.data["rubrics"]
    graded = [(r["points"], v) for r, v in zip(rubrics, verdicts) if isinstance(v, bool)]
    failed = len(rubrics) - len(graded)
    if not any(p > 0 for p, _ in graded):
        return ScoreResult(
            0.0, "grader_failed", f"no positive criterion could be graded ({failed} failed)"
        )
    result = rubric_score([p for p, _ in graded], [m for _, m in graded])
    met = sum(m for _, m in graded)
    detail = (
        f"{met}/{len(rubrics)} criteria met, {result.achieved:g}/{result.possible:g} points, "
        f"raw score {result.raw:.4f}"
    )
    if failed:
        return ScoreResult(
            result.clipped, "grader_unparseable", f"{detail}; {failed} criteria not graded"
        )
    return ScoreResult(result.clipped, None, detail)
