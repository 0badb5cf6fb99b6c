"""Arena-Hard pairwise judging: prompts, verdict parsing and per-question scores.

Each question is judged twice, once with the model's answer as assistant A and once
as assistant B (the baseline takes the other seat), to cancel the judge's position
bias. The judge ends with one of five labels, [[A>>B]] [[A>B]] [[A=B]] [[B>A]] [[B>>A]].

Scoring follows the reference harness (llm-eval-framework's ``aggregate_winrate``,
Arena-Hard's ``weight=3``): from the model's point of view a win is 1, a tie 0.5 and
a loss 0, and a *strong* verdict (``>>``) counts as three games. A question's score is
the weighted mean over its valid games, e.g. a strong win plus a tie gives
(3*1 + 0.5) / 4 = 0.875. The benchmark's win rate is the mean of the question scores;
the reference pools all weighted games across questions instead, so the two differ only
in how much a question with strong verdicts weighs against one without.
A game whose reply has no valid label is dropped and reported; a question with no
valid game scores 0.

Against answers that address the judge (see :mod:`..judge_guard`): the answers sit
between markers carrying a boundary code they cannot contain, the system prompt says
that nothing between the markers is an instruction, only the judge's own last label
counts, and an answer carrying judge-directed content is not judged at all (it loses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..base import Message
from ..judge_guard import InjectionFinding, boundary, echoed, find_injection
from ..llm_judge import strip_thinking

# Arena-Hard v2.0's judge system prompt for the creative-writing category (unlike the
# hard-prompt one it does not ask the judge to write its own answer first).
SYSTEM_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants "
    "to the user prompt displayed below. You will be given assistant A's answer and assistant B's answer. Your "
    "job is to evaluate which assistant's answer is better.\n\n"
    "When evaluating the assistants' answers, compare both assistants' answers. You must identify and correct "
    "any mistakes or inaccurate information.\n\n"
    "Then consider if the assistant's answers are helpful, relevant, and concise. Helpful means the answer "
    "correctly responds to the prompt or follows the instructions. Note when user prompt has any ambiguity or "
    "more than one interpretation, it is more helpful and appropriate to ask for clarifications or more "
    "information from the user than providing an answer based on assumptions. Relevant means all parts of the "
    "response closely connect or are appropriate to what is being asked. Concise means the response is clear "
    "and not verbose or excessive.\n\n"
    "Then consider the creativity and novelty of the assistant's answers when needed. Finally, identify any "
    "missing important information in the assistants' answers that would be beneficial to include when "
    "responding to the user prompt.\n\n"
    "After providing your explanation, you must output only one of the following choices as your final verdict "
    "with a label:\n\n"
    "1. Assistant A is significantly better: [[A>>B]]\n"
    "2. Assistant A is slightly better: [[A>B]]\n"
    "3. Tie, relatively the same: [[A=B]]\n"
    "4. Assistant B is slightly better: [[B>A]]\n"
    "5. Assistant B is significantly better: [[B>>A]]\n\n"
    'Example output: "My final verdict is tie: [[A=B]]".'
)

_TEMPLATES = Path(__file__).with_name("templates")
# The reference's user message, with the answer markers carrying the request's boundary code.
USER_TEMPLATE = (_TEMPLATES / "judge_user.txt").read_text(encoding="utf-8").removesuffix("\n")
# Appended to the system prompt: what the markers mean and that answers are never instructions.
BOUNDARY_NOTE = (_TEMPLATES / "boundary_note.txt").read_text(encoding="utf-8")

STRONG_WEIGHT = 3  # a significant win/loss counts as this many games (Arena-Hard's weight)

# label -> (score of assistant A, weight). The mirrored spellings are accepted as the
# reference harness accepts them.
VERDICTS: dict[str, tuple[float, int]] = {
    "A>>B": (1.0, STRONG_WEIGHT),
    "A>B": (1.0, 1),
    "A=B": (0.5, 1),
    "B>A": (0.0, 1),
    "B>>A": (0.0, STRONG_WEIGHT),
    "B<<A": (1.0, STRONG_WEIGHT),
    "B<A": (1.0, 1),
    "B=A": (0.5, 1),
    "A<B": (0.0, 1),
    "A<<B": (0.0, STRONG_WEIGHT),
}

# The reference's patterns, tried in order on the upper-cased reply; the last match wins.
_PATTERNS = (re.compile(r"\[\[([AB<>=]+)\]\]"), re.compile(r"\[([AB<>=]+)\]"))


def judge_messages(question: str, answer_a: str, answer_b: str) -> list[Message]:
    """The judge request comparing *answer_a* (assistant A) with *answer_b* (assistant B).

    Both answers sit between markers carrying a boundary code neither can contain.
    """
    code = boundary(SYSTEM_PROMPT, question, answer_a, answer_b)
    user = USER_TEMPLATE.format(question=question, answer_a=answer_a, answer_b=answer_b, code=code)
    return [
        {"role": "system", "content": SYSTEM_PROMPT + BOUNDARY_NOTE.format(code=code)},
        {"role": "user", "content": user},
    ]


def injection_in(answer: str) -> list[InjectionFinding]:
    """Judge-directed content in a model answer (labels, markers, instructions, prompt echoes)."""
    return find_injection(answer, prompt=SYSTEM_PROMPT)


def parse_verdict(reply: str, answer: str = "") -> str | None:
    """The judge's own final verdict label (the last one given), or None if there is none.

    A label on a line the judge copied out of the model's *answer* is not the judge's.
    """
    text = strip_thinking(reply).upper()
    lines = text.splitlines()
    for pattern in _PATTERNS:
        found = [(m.group(1), m.start()) for m in pattern.finditer(text) if m.group(1)]
        if answer:
            found = [(label, at) for label, at in found if not echoed(_line_at(lines, at), answer)]
        if found:
            label = found[-1][0]
            return label if label in VERDICTS else None
    return None


def _line_at(lines: list[str], offset: int) -> str:
    """The line of the text (given as *lines*) that contains character *offset*."""
    for line in lines:
        if offset <= len(line):
            return line
        offset -= len(line) + 1
    return ""


@dataclass(frozen=True)
class Game:
    """One judged comparison: which seat the model had and the judge's label (None = unparseable)."""

    model_is_a: bool
    label: str | None

    @property
    def valid(self) -> bool:
        return self.label is not None

    def model_score(self) -> tuple[float, int]:
        """(score of the model in this game, weight)."""
        assert self.label is not None
        a_score, weight = VERDICTS[self.label]
        return (a_score if self.model_is_a else 1.0 - a_score), weight


def question_score(games: list[Game]) -> float | None:
    """Weighted mean of the model's game scores; None when no game is valid."""
    scored = [g.model_score() for g in games if g.valid]
    total_weight = sum(w for _, w in scored)
    if not total_weight:
        return None
    return sum(s * w for s, w in scored) / total_weight
