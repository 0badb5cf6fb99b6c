r"""AIME 2025 as a sandbox :class:`Benchmark`: PostTrainBench's ``inspect_evals/aime2025``.

PostTrainBench's ``src/eval/tasks/aime2025/evaluate.py`` runs the ``aime2025`` task of
inspect_evals at commit 06001a83e6d7c709c2ede0570dce7f1031a0bad8 (files
``src/inspect_evals/aime2025/aime2025.py`` and ``aime2024/aime2024.py``, identical in the
PyPI release inspect-evals 0.3.103) with inspect-ai 0.3.150:

* messages: no system message; one user message, :data:`USER_PROMPT_TEMPLATE` (the
  ``prompt_template`` solver of ``aime2024_solver``) around the problem as it is in the
  data file (``record_to_sample``: ``input=record["problem"]``);
* target: ``str(record["answer"])``;
* scorer ``aime_scorer``: the greedy ``re.sub(r"\\boxed\{(.+)\}", r"\1", completion)``
  (:func:`remove_boxed_from_ans`), then ``match(numeric=True)`` on what is left (ported
  in :mod:`..gsm8k.inspect_match`). So the last bare number of the output counts,
  wherever it is, and a target that is not ``str.isnumeric()`` would be compared as
  text (never the case here: the loader only accepts integers 0..999).

Added by this project, outside inspect: a completion that hedges across several final
answers (:func:`answer_hedge`) scores 0 and is reported as ``hedged_answer``.

tests/task/test_aime_inspect_parity.py runs inspect_evals' own task function and scorer
on the fixture data and compares every message and verdict.
"""

from __future__ import annotations

import re
from typing import Any

from ..answers import HEDGE_FINDING, boxed_integer, integer_hedge, last_boxed, last_integer
from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from ..gsm8k.inspect_match import match_end
from ..inspect_output import inspect_completion

# aime2024.py's USER_PROMPT_TEMPLATE (after its .strip()); aime2025 imports that solver.
USER_PROMPT_TEMPLATE = (
    "Solve the following math problem step by step.\n"
    'The last line of your response should be of the form "ANSWER: $ANSWER" (without '
    "quotes) where $ANSWER is the answer to the problem.\n\n{prompt}\n\nRemember to put "
    'your answer on its own line at the end in the form "ANSWER: $ANSWER" (without '
    "quotes) where $ANSWER is the answer to the problem, and you do not need to use a "
    "\\boxed command."
)
_BOXED_GREEDY = re.compile(r"\\boxed\{(.+)\}")
# Two different integers given as alternatives on the last ANSWER line ("12 or 13",
# "12, 13"); a comma before exactly three digits is a thousands separator.
_ANSWER_LINE = re.compile(r"\bANSWER\s*:([^\n]*)", re.IGNORECASE)
_INTEGER_ALTERNATIVES = re.compile(
    r"(?<![\d.])(\d+)\s*(?:,(?!\d{3}(?!\d))|;|/|\bor\b|\band\b)\s*(\d+)(?![\d.])"
)


def remove_boxed_from_ans(answer: str) -> str:
    """aime2025.py's ``remove_boxed_from_ans`` (inspect-evals 0.3.103): greedy per line,
    so ``\\boxed{1} and \\boxed{2}`` becomes ``1} and \\boxed{2``."""
    return _BOXED_GREEDY.sub(r"\1", answer)


def answer_hedge(completion: str) -> str | None:
    """Why *completion* offers several integer answers at once, or None.

    :func:`..answers.integer_hedge` (boxes, the last line), plus a last ``ANSWER:`` line
    naming two different integers as alternatives: inspect's last-number rule would pick
    the last one.
    """
    hedged = integer_hedge(completion)
    if hedged:
        return hedged
    lines = _ANSWER_LINE.findall(completion)
    if lines:
        pairs = _INTEGER_ALTERNATIVES.finditer(lines[-1])
        if any(int(m.group(1)) != int(m.group(2)) for m in pairs):
            return f"the last ANSWER line names alternatives: {lines[-1].strip()[:40]!r}"
    return None


def extract_answer(completion: str) -> tuple[int | None, str]:
    """(integer, how it was found): the last ``\\boxed{}``, else the last integer.

    This project's previous AIME rule, no longer the score; tests/security keeps it as
    the plain-rule control that a hedge would have been paid by.
    """
    if last_boxed(completion) is not None:
        return boxed_integer(completion), "boxed"
    return last_integer(completion), "last_integer"


class Aime2025(Benchmark):
    """30 problems; the score is inspect_evals' ``aime_scorer`` (0 for a completion that
    hedges across several final answers)."""

    id = "aime2025"
    name = "AIME 2025"
    # Sampled like the usual AIME protocol (temperature 0.6, top_p 0.95); the final
    # evaluation averages 4 seeds because 30 items give a noisy single-run score.
    # 4096 new tokens leaves room for long reasoning and still fits (with the prompt)
    # in the 8k context of the smallest base models.
    generation = GenerationSettings(max_new_tokens=4096, temperature=0.6, top_p=0.95, num_seeds=4)

    def build_messages(self, sample: Sample) -> list[Message]:
        """aime2024_solver's ``prompt_template``: one user message, no system message."""
        content = USER_PROMPT_TEMPLATE.format(prompt=sample.data["problem"])
        return [{"role": "user", "content": content}]

    def target(self, sample: Sample) -> str:
        """record_to_sample's ``target=str(record["answer"])``."""
        return str(sample.data["answer"])

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["problem"], answer=str(data["answer"]))

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        """``aime_scorer``'s verdict; 0 and ``hedged`` for a hedge."""
        completion = inspect_completion(completion)  # what its scorer reads
        target = self.target(sample)
        cleaned = remove_boxed_from_ans(completion)
        try:
            answer, matched = match_end(cleaned, target)
        except (ValueError, OverflowError) as exc:  # inspect's scorer raises here too
            return ScoreResult(0.0, "no_answer", f"inspect's match fails: {exc}; target={target!r}")
        detail = f"match(numeric=True): answer={answer[-80:]!r}, target={target!r}"
        hedged = answer_hedge(completion)
        if hedged:
            return ScoreResult(0.0, "hedged", f"{hedged}; {detail}", (HEDGE_FINDING,))
        if matched:
            return ScoreResult(1.0, None, detail)
        has_number = any(ch.isdigit() for ch in cleaned)
        return ScoreResult(0.0, "wrong_answer" if has_number else "no_answer", detail)
