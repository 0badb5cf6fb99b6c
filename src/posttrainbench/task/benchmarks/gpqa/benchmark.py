"""GPQA main as a sandbox :class:`Benchmark`: PostTrainBench's ``gpqa_main`` task.

PostTrainBench defines the task itself (``src/eval/tasks/gpqamain/evaluate.py``) on
inspect-ai 0.3.150: ``hf_dataset("Idavidrein/gpqa", name="gpqa_main", split="train",
shuffle_choices=True)``, the solver ``multiple_choice(cot=True)`` and the scorer
``choice()``. Here, as in ``inspect_ai/solver/_multiple_choice.py``:

* messages: one user message, :data:`SINGLE_ANSWER_TEMPLATE_COT` with ``{letters}`` =
  ``A,B,C,D``, the question as it is in the CSV and the choices as ``A) ...\\nB) ...``
  (``prompt`` / ``answer_options``);
* verdict: :func:`parse_answer` (``parse_answers`` with ``multiple_correct=False``)
  must give exactly the letter of the correct choice (``choice()``).

One deliberate difference: PostTrainBench's ``shuffle_choices=True`` shuffles with
``random.Random(None)`` (``MemoryDataset.shuffle_choices``), so the order of the
choices, and which letter is right, changes on every run. Ours is the same shuffle
(the same permutation-of-positions algorithm) seeded per question by
:func:`.source.shuffled_choices`, so a run is reproducible and does not depend on
``--limit`` or file order. It changes which letter is right for a question, never the
verdict on a given completion for a given order.

Added by this project, outside inspect: a completion that hedges across several choices
(:func:`..answers.letter_hedge`) scores 0 and is reported as ``hedged_answer``.

tests/task/test_gpqa_inspect_parity.py runs PostTrainBench's task (its solver and
scorer) on the fixture data and compares every message and verdict.
"""

from __future__ import annotations

import re
from typing import Any

from ..answers import HEDGE_FINDING, letter_hedge
from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from ..inspect_output import inspect_completion
from .source import LETTERS

# inspect-ai 0.3.150 solver/_multiple_choice.py SINGLE_ANSWER_TEMPLATE_COT (after .strip()).
SINGLE_ANSWER_TEMPLATE_COT = (
    "Answer the following multiple choice question. The last line of your response "
    "should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER "
    "is one of {letters}. Think step by step before answering.\n\n{question}\n\n{choices}"
)
# parse_answers' two patterns: first an "ANSWER:" at a line start, else anywhere.
STRICT_ANSWER = re.compile(r"(?i)^ANSWER\s*:\s*([A-Za-z\d ,]+)\s*(?:$|\n|\.)", re.MULTILINE)
LOOSE_ANSWER = re.compile(r"(?i)ANSWER\s*:\s*([A-Za-z\d ,]+)(?:[^\w]|\n|$|\.)")


def format_choices(choices: list[str]) -> str:
    """inspect's ``answer_options``: ``"A) first\\nB) second..."``."""
    return "\n".join(f"{letter}) {text}" for letter, text in zip(LETTERS, choices))


def build_prompt(question: str, choices: list[str]) -> str:
    """inspect's ``prompt(question, choices, SINGLE_ANSWER_TEMPLATE_COT)``."""
    letters = ",".join(LETTERS[: len(choices)])
    return SINGLE_ANSWER_TEMPLATE_COT.format(
        choices=format_choices(choices), letters=letters, question=question
    )


def parse_answer(completion: str, n_choices: int = 4) -> str | None:
    """inspect's ``parse_answers(state, multiple_correct=False)``: the chosen letter or None.

    The first match of the strict pattern, else of the loose one (a later ``ANSWER:`` is
    not looked at); its text stripped and without trailing dots must be exactly one
    allowed letter, upper case (``ANSWER: b`` and ``ANSWER: (B)`` choose nothing).
    """
    match = STRICT_ANSWER.search(completion) or LOOSE_ANSWER.search(completion)
    if match is None:
        return None
    matched = match.group(1).strip().rstrip(".")
    return matched if matched in tuple(LETTERS[:n_choices]) else None  # one letter, not "AB"


class GpqaMain(Benchmark):
    """448 questions; right when :func:`parse_answer` gives the shuffled correct letter
    (and the completion does not hedge across several choices)."""

    id = "gpqamain"
    name = "GPQA main"
    # Greedy; 1024 tokens lets a small model reason before the ANSWER line.
    generation = GenerationSettings(max_new_tokens=1024, temperature=0.0)

    def build_messages(self, sample: Sample) -> list[Message]:
        """The ``multiple_choice(cot=True)`` user message (no system message)."""
        text = build_prompt(sample.data["question"], sample.data["choices"])
        return [{"role": "user", "content": text}]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        choices, letter = data["choices"], data["answer"]
        answer = choices["ABCD".index(letter)] if letter in "ABCD" and len(choices) == 4 else None
        return ContaminationText(question=data["question"], answer=answer)

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        """``choice()``'s verdict after ``parse_answers``; 0 and ``hedged`` for a hedge."""
        completion = inspect_completion(completion)  # what its scorer reads
        got = parse_answer(completion, len(sample.data["choices"]))
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
