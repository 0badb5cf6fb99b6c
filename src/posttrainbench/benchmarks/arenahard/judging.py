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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import Message
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
    "Example output: \"My final verdict is tie: [[A=B]]\"."
)

USER_TEMPLATE = (
    "<|User Prompt|>\n{question}\n\n"
    "<|The Start of Assistant A's Answer|>\n{answer_a}\n"
    "<|The End of Assistant A's Answer|>\n\n"
    "<|The Start of Assistant B's Answer|>\n{answer_b}\n"
    "<|The End of Assistant B's Answer|>"
)

STRONG_WEIGHT = 3  # a significant win/loss counts as this many games (Arena-Hard's weight)

# label -> (score of assistant A, weight). The mirrored spellings are accepted as the
# reference harness accepts them.
VERDICTS: dict[str, tuple[float, int]] = {
    "A>>B": (1.0, STRONG_WEIGHT), "A>B": (1.0, 1), "A=B": (0.5, 1), "B>A": (0.0, 1), "B>>A": (0.0, STRONG_WEIGHT),
    "B<<A": (1.0, STRONG_WEIGHT), "B<A": (1.0, 1), "B=A": (0.5, 1), "A<B": (0.0, 1), "A<<B": (0.0, STRONG_WEIGHT),
}

# The reference's patterns, tried in order on the upper-cased reply; the last match wins.
_PATTERNS = (re.compile(r"\[\[([AB<>=]+)\]\]"), re.compile(r"\[([AB<>=]+)\]"))


def judge_messages(question: str, answer_a: str, answer_b: str) -> list[Message]:
    """The judge request comparing *answer_a* (assistant A) with *answer_b* (assistant B)."""
    user = USER_TEMPLATE.format(question=question, answer_a=answer_a, answer_b=answer_b)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_verdict(reply: str) -> str | None:
    """The verdict label of a judge reply (the last one given), or None if there is none."""
    text = strip_thinking(reply).upper()
    for pattern in _PATTERNS:
        found = [m for m in pattern.findall(text) if m]
        if found:
            label = found[-1]
            return label if label in VERDICTS else None
    return None


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
