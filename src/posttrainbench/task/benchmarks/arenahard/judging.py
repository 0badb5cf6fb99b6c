"""Arena-Hard pairwise judging as PostTrainBench does it: prompts, verdicts, scores.

Everything here follows aisa-group/PostTrainBench at commit
9082063a62e10e040f1acacdec2ccfc1467e0c00, ``src/eval/tasks/arenahardwriting/`` (below,
``evaluate.py`` and ``evaluation_code/...`` are files of that folder):

* **Candidate answer** (evaluate.py:361-382): the completion stripped; a leading
  ``<think>...</think>`` (up to the first ``</think>``) removed and stripped again; then
  PostTrainBench's repetition limiter (:mod:`..repetition`, unchanged). An answer that
  does not *start* with ``<think>``, or never closes it, is judged as it is.
* **Judge request** (evaluate.py:534-590): system prompt
  ``JUDGE_SETTINGS["creative_writing"]["system_prompt"]`` (evaluation_code/utils/
  judge_utils.py), user prompt ``prompt_template`` of evaluation_code/config/
  arena-hard-v2.0.yaml filled with ``str.format``; both are in ``templates/`` verbatim.
  Two games per question: game 1 with the baseline as assistant A and the candidate as
  B, game 2 swapped.
* **Verdict** (evaluate.py:446-457, ``get_score``): the config's ``regex_patterns``
  tried in order on the upper-cased reply; the last non-empty match of the first pattern
  that matches is the label.
* **Scores** (evaluate.py:628-676, ``_judgments_to_battles`` with ``weight=3``): each
  label maps to a list of assistant-A scores (``>`` one game, ``>>`` three); game 1's are
  flipped (1 - s) to the candidate's side, game 2's taken as they are, and the two lists
  concatenated: a question's *battles*. A question with a game without a label is left
  out. The benchmark's ``accuracy`` is the mean of all battles pooled over the questions
  and ``stderr`` their sample standard deviation (ddof=1) over sqrt(number of battles)
  (evaluate.py:611-625, ``_compute_metrics``): see :func:`ptb_metrics`.

What we add, none of which changes a verdict on an honest answer:

* an answer carrying judge-directed content (:mod:`..judge_guard`: verdict labels,
  the prompt's markers, instructions to the judge, echoes of its prompt) is not sent to
  the judge; it is scored as the judge's worst verdict in both games
  (:data:`INJECTED_BATTLES`, six losses);
* a label on a line of the reply that the judge copied out of the candidate's answer is
  not the judge's (only possible for text the guard would have flagged, or for a
  bracketed non-label such as ``[A]``);
* a label that PostTrainBench's score table does not know (``[[A]]``, ``[[A>>>B]]``)
  makes the game unscored here; PostTrainBench stops the whole evaluation with a
  ``KeyError`` there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base import Message, ScoreResult
from ..judge_guard import InjectionFinding, echoed, find_injection
from ..repetition import limit_repetitions

_TEMPLATES = Path(__file__).with_name("templates")
# Verbatim from PostTrainBench (see templates/README.md); the files end in one newline
# that is not part of the text.
SYSTEM_PROMPT = (_TEMPLATES / "judge_system.txt").read_text(encoding="utf-8").removesuffix("\n")
USER_TEMPLATE = (_TEMPLATES / "judge_user.txt").read_text(encoding="utf-8").removesuffix("\n")

STRONG_WEIGHT = 3  # evaluate.py:628 ``weight: int = 3``

# evaluate.py:632-643, ``score_map``: label -> assistant A's score in each counted game.
VERDICTS: dict[str, list[float]] = {
    "A>B": [1],
    "A>>B": [1] * STRONG_WEIGHT,
    "A=B": [0.5],
    "A<<B": [0] * STRONG_WEIGHT,
    "A<B": [0],
    "B>A": [0],
    "B>>A": [0] * STRONG_WEIGHT,
    "B=A": [0.5],
    "B<<A": [1] * STRONG_WEIGHT,
    "B<A": [1],
}

# evaluation_code/config/arena-hard-v2.0.yaml ``regex_patterns``, in order.
PATTERNS = (re.compile(r"\[\[([AB<>=]+)\]\]"), re.compile(r"\[([AB<>=]+)\]"))

# An answer that addresses the judge: the strongest loss in both games.
INJECTED_BATTLES: tuple[float, ...] = (0.0,) * (2 * STRONG_WEIGHT)


def candidate_answer(completion: str) -> str:
    """The answer PostTrainBench judges for a model *completion* (evaluate.py:361-382)."""
    answer = completion.strip()
    if answer.startswith("<think>") and ("</think>" in answer):
        answer = answer.split("</think>", maxsplit=1)[1]
        answer = answer.strip()
    return limit_repetitions(answer)


def judge_messages(question: str, answer_a: str, answer_b: str) -> list[Message]:
    """The judge request comparing *answer_a* (assistant A) with *answer_b* (assistant B),
    as evaluate.py:561-574 builds it."""
    user = USER_TEMPLATE.format(QUESTION=question, ANSWER_A=answer_a, ANSWER_B=answer_b)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


def game_messages(question: str, baseline: str, candidate: str) -> list[list[Message]]:
    """The two games of one question: baseline as A (game 1), then candidate as A (game 2)."""
    return [
        judge_messages(question, baseline, candidate),
        judge_messages(question, candidate, baseline),
    ]


def injection_in(answer: str) -> list[InjectionFinding]:
    """Judge-directed content in a candidate answer (labels, markers, instructions, prompt echoes)."""
    return find_injection(answer, prompt=SYSTEM_PROMPT)


def parse_verdict(reply: str, answer: str = "") -> str | None:
    """The judge's verdict label in *reply*, as PostTrainBench's ``get_score`` reads it;
    None without one, or with a label its score table does not have.

    A match on a line the judge copied out of the candidate's *answer* is skipped.
    """
    text = reply.upper()
    lines = text.splitlines()
    for pattern in PATTERNS:
        found = [(m.group(1), m.start()) for m in pattern.finditer(text) if m.group(1)]
        if answer:
            found = [(label, at) for label, at in found if not echoed(_line_at(lines, at), answer)]
        if found:
            label = found[-1][0].strip("\n")
            return label if label in VERDICTS else None
    return None


def _line_at(lines: list[str], offset: int) -> str:
    """The line of the text (given as *lines*) that contains character *offset*."""
    for line in lines:
        if offset <= len(line):
            return line
        offset -= len(line) + 1
    return ""


def battles(label_ab: str | None, label_ba: str | None) -> tuple[float, ...] | None:
    """The candidate's battle scores from game 1's and game 2's labels (evaluate.py:654-664);
    None when either game has no label (the question is left out)."""
    if label_ab is None or label_ba is None:
        return None
    return tuple(float(s) for s in [1 - s for s in VERDICTS[label_ab]] + VERDICTS[label_ba])


@dataclass(frozen=True)
class ArenaScore(ScoreResult):
    """A question's result with its PostTrainBench battles (empty: left out of the pool)."""

    battles: tuple[float, ...] = ()


def question_score(label_ab: str | None, label_ba: str | None) -> float | None:
    """A question's score: the mean of its battles, or of the labelled game's when only one
    game has a label (PostTrainBench leaves such a question out); None with neither."""
    both = battles(label_ab, label_ba)
    if both is not None:
        return sum(both) / len(both)
    if label_ab is not None:
        one = [1 - s for s in VERDICTS[label_ab]]
    elif label_ba is not None:
        one = list(VERDICTS[label_ba])
    else:
        return None
    return sum(one) / len(one)


def ptb_metrics(results: Sequence[ScoreResult]) -> dict[str, float]:
    """PostTrainBench's ``accuracy`` and ``stderr`` (evaluate.py:611-625) over the pooled
    battles of *results* (:class:`ArenaScore`; any other result counts no battle)."""
    scores = [float(s) for r in results for s in getattr(r, "battles", ())]
    n = len(scores)
    if n == 0:
        return {"accuracy": 0.0, "stderr": 0.0}
    accuracy = math.fsum(scores) / n
    if n == 1:
        return {"accuracy": accuracy, "stderr": 0.0}
    var = math.fsum((s - accuracy) ** 2 for s in scores) / (n - 1)
    return {"accuracy": accuracy, "stderr": math.sqrt(var) / math.sqrt(n)}
