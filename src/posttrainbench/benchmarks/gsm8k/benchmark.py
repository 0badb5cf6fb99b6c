"""GSM8K as a sandbox :class:`Benchmark`: zero-shot chat prompt, lm-eval scoring."""

from __future__ import annotations

from typing import Any

from ..answers import HEDGE_FINDING
from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from .extract import INVALID, hedge, judge

PROMPT = (
    "Solve the following math problem step by step. Show your reasoning, then give the "
    'final answer on the last line in the form "#### <number>" (just the number, '
    "no units).\n\n{question}"
)


class Gsm8k(Benchmark):
    """1319 test problems; the score is lm-eval's ``flexible-extract`` exact match (0 for a
    completion that hedges across several final answers)."""

    id = "gsm8k"
    name = "GSM8K"
    # Greedy like lm-eval; 512 tokens is ample for a grade-school solution.
    generation = GenerationSettings(max_new_tokens=512, temperature=0.0)

    def build_messages(self, sample: Sample) -> list[Message]:
        return [{"role": "user", "content": PROMPT.format(question=sample.data["question"])}]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["question"], answer=data["answer"])

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        v = judge(completion, sample.data["answer"])
        detail = (
            f"flexible-extract={v.flexible!r} ({'right' if v.flexible_correct else 'wrong'}); "
            f"strict-match={v.strict!r} ({'right' if v.strict_correct else 'wrong'}); "
            f"target={sample.data['target']!r}"
        )
        hedged = hedge(completion)
        if hedged:
            return ScoreResult(0.0, "hedged", f"{hedged}; {detail}", (HEDGE_FINDING,))
        if v.flexible_correct:
            return ScoreResult(1.0, None, detail)
        return ScoreResult(0.0, "no_answer" if v.flexible == INVALID else "wrong_answer", detail)
