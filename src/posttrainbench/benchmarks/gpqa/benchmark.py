"""GPQA main as a sandbox :class:`Benchmark`: zero-shot chain of thought, letter answers."""

from __future__ import annotations

from typing import Any

from ..answers import HEDGE_FINDING, extract_letter, letter_hedge
from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from .source import LETTERS

# inspect_evals' multiple-choice chain-of-thought template.
PROMPT = (
    "Answer the following multiple choice question. The last line of your response "
    "should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER "
    "is one of ABCD. Think step by step before answering.\n\n{question}\n\n{choices}"
)


def format_choices(choices: list[str]) -> str:
    return "\n".join(f"{letter}) {text}" for letter, text in zip(LETTERS, choices))


class GpqaMain(Benchmark):
    """448 questions; right when the extracted letter is the shuffled correct one (and the
    completion does not hedge across several choices)."""

    id = "gpqamain"
    name = "GPQA main"
    # Greedy; 1024 tokens lets a small model reason before the ANSWER line.
    generation = GenerationSettings(max_new_tokens=1024, temperature=0.0)

    def build_messages(self, sample: Sample) -> list[Message]:
        text = PROMPT.format(
            question=sample.data["question"], choices=format_choices(sample.data["choices"])
        )
        return [{"role": "user", "content": text}]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        choices, letter = data["choices"], data["answer"]
        answer = choices["ABCD".index(letter)] if letter in "ABCD" and len(choices) == 4 else None
        return ContaminationText(question=data["question"], answer=answer)

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        got = extract_letter(completion)
        expected = sample.data["answer"]
        detail = f"extracted={got!r}; expected={expected!r}"
        hedged = letter_hedge(completion)
        if hedged:
            return ScoreResult(0.0, "hedged", f"{hedged}; {detail}", (HEDGE_FINDING,))
        if got is None:
            return ScoreResult(0.0, "no_answer", detail)
        return ScoreResult(
            1.0 if got == expected else 0.0, None if got == expected else "wrong_answer", detail
        )
