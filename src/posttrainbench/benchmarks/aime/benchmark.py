"""AIME 2025 as a sandbox :class:`Benchmark`: sampled generation, integer answers."""

from __future__ import annotations

from typing import Any

from ..answers import HEDGE_FINDING, boxed_integer, integer_hedge, last_boxed, last_integer
from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult

PROMPT = (
    "Solve the following math problem. Reason step by step, and put your final answer, "
    "an integer from 0 to 999, within \\boxed{{}}.\n\n{problem}"
)


def extract_answer(completion: str) -> tuple[int | None, str]:
    """(integer answer, how it was found): the last ``\\boxed{}``, else the last integer.

    When a box exists its content is the answer even if it is not an integer (then
    None): the model committed to it.
    """
    if last_boxed(completion) is not None:
        return boxed_integer(completion), "boxed"
    return last_integer(completion), "last_integer"


class Aime2025(Benchmark):
    """30 problems; a completion is right when its integer equals the answer (and it
    does not hedge across several answers)."""

    id = "aime2025"
    name = "AIME 2025"
    # Sampled like the usual AIME protocol (temperature 0.6, top_p 0.95); the final
    # evaluation averages 4 seeds because 30 items give a noisy single-run score.
    # 4096 new tokens leaves room for long reasoning and still fits (with the prompt)
    # in the 8k context of the smallest base models.
    generation = GenerationSettings(max_new_tokens=4096, temperature=0.6, top_p=0.95, num_seeds=4)

    def build_messages(self, sample: Sample) -> list[Message]:
        return [{"role": "user", "content": PROMPT.format(problem=sample.data["problem"])}]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["problem"], answer=str(data["answer"]))

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        expected = int(sample.data["answer"])
        got, how = extract_answer(completion)
        detail = f"extracted={got!r} ({how}); expected={expected}"
        hedged = integer_hedge(completion)
        if hedged:
            return ScoreResult(0.0, "hedged", f"{hedged}; {detail}", (HEDGE_FINDING,))
        if got is None:
            return ScoreResult(0.0, "no_answer", detail)
        return ScoreResult(
            1.0 if got == expected else 0.0, None if got == expected else "wrong_answer", detail
        )
