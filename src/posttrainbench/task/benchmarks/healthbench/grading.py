"""HealthBench rubric grading, as PostTrainBench's ``evaluation_code/grader.py`` and
``scoring.py`` (aisa-group/PostTrainBench at 9082063a62e10e040f1acacdec2ccfc1467e0c00,
MIT; its grader prompt is OpenAI simple-evals' ``healthbench_eval.py`` one, MIT; see
``templates/README.md``).

One grader request per (response, rubric criterion) (``grader.py:160-223``): the user
message is ``templates/grader_prompt.txt`` with ``<<conversation>>`` replaced by the
conversation plus the response as ``role: content`` turns joined by blank lines
(``grader.py:146-152``) and ``<<rubric_item>>`` by ``[points] criterion``
(``grader.py:155-157``). The reply counts when, after stripping a leading ```` ```json ````
and a trailing ```` ``` ````, it is a JSON object whose ``criteria_met`` is a JSON boolean
(``grader.py:134-143,210-214``); anything else is asked again, 5 attempts in all
(``grader.py:99,185-231``), and a criterion still ungraded then counts as not met
(``grader.py:309-316``).

A response's score (``grader.py:318-325``) is the sum of the points of the criteria it
meets (a met undesirable criterion subtracts its negative points) over the sum of the
positive points, 0 when there are none. It is *not* clipped: it may be below 0. The
benchmark score is the mean over responses clipped to [0, 1] (``scoring.py:55-56``);
:func:`ptb_metrics` computes PostTrainBench's whole metrics dict (``evaluate.py:262-273``).

Against responses that address the grader (see :mod:`..judge_guard`), none of which
changes the request or the verdict for an honest response: a response carrying
grader-directed content or echoing a rubric item is not graded at all (it scores 0);
the placeholders are filled in one pass, so a response cannot make the template paste
the rubric item into it (PostTrainBench's two ``str.replace`` calls would; the result is
the same for any text without a literal ``<<rubric_item>>``, which the guard flags); and
a JSON reply that the grader copied out of the response is not its verdict.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import Message
from ..judge_guard import InjectionFinding, echoed, find_injection
from ..repetition import limit_repetitions

# PostTrainBench's grader prompt (simple-evals'), verbatim: grader.py:47-96.
GRADER_TEMPLATE = (
    (Path(__file__).with_name("templates") / "grader_prompt.txt")
    .read_text(encoding="utf-8")
    .strip()
)
_PLACEHOLDER = re.compile(r"<<(conversation|rubric_item)>>")
_FENCE = re.compile(r"^```json\s*|\s*```$")  # grader.py:137
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TAG_SEP = ":"


def model_answer(completion: str) -> str:
    """The answer PostTrainBench grades (``evaluate.py:234,249-253``): stripped, a
    leading ``<think>`` block cut at the first ``</think>``, repetitions limited."""
    text = completion.strip()
    if text.startswith(THINK_OPEN):
        text = text.split(THINK_CLOSE, maxsplit=1)[-1].strip()
    return limit_repetitions(text)


def format_conversation(messages: Sequence[Message]) -> str:
    """``role: content`` turns joined by blank lines (``grader.py:149-152``)."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def format_rubric_item(criterion: str, points: Any) -> str:
    """``[points] criterion`` (``grader.py:155-157``; simple-evals' ``RubricItem.__str__``)."""
    return f"[{points}] {criterion}"


def grader_messages(
    conversation: Sequence[Message], response: str, criterion: str, points: Any
) -> list[Message]:
    """The grader request for one criterion of *response*, the reply to *conversation*
    (``grader.py:172-181,194``)."""
    fill = {
        "conversation": format_conversation(
            [*conversation, {"role": "assistant", "content": response}]
        ),
        "rubric_item": format_rubric_item(criterion, points),
    }
    # One pass: text pasted in (the response) is not searched for placeholders again.
    prompt = _PLACEHOLDER.sub(lambda m: fill[m.group(1)], GRADER_TEMPLATE)
    return [{"role": "user", "content": prompt}]


def injection_in(response: str, criteria: Sequence[str]) -> list[InjectionFinding]:
    """Grader-directed content in a response, or an echo of its rubric or of the grader prompt."""
    return find_injection(response, criteria, GRADER_TEMPLATE)


def parse_grade(reply: str | None, response: str = "") -> bool | None:
    """``criteria_met`` of the grader's *reply*, or None when PostTrainBench would ask again.

    As ``grader.py:134-143,207-214``: the reply, stripped of a leading ```` ```json ````
    and a trailing ```` ``` ````, must be one JSON object whose ``criteria_met`` is a
    JSON boolean. A reply that is an object copied out of the *response* is not the
    grader's verdict (None).
    """
    if reply is None:  # no content (grader.py:207-208 fails on it and asks again)
        return None
    text = _FENCE.sub("", reply.strip())
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or (response and echoed(text, response)):
        return None
    met = data.get("criteria_met")
    return met if isinstance(met, bool) else None


@dataclass(frozen=True)
class RubricScore:
    """A response's rubric score as PostTrainBench's ``ExampleResult``: ``raw`` is its
    ``normalized_score`` (may be below 0); ``clipped`` is in [0, 1]."""

    raw: float
    achieved: float
    possible: float

    @property
    def clipped(self) -> float:
        return min(1.0, max(0.0, self.raw))


def rubric_score(points: Sequence[Any], met: Sequence[bool]) -> RubricScore:
    """sum(points of met criteria) / sum(positive points), 0 without positive points
    (``grader.py:318-325``)."""
    if len(points) != len(met):
        raise ValueError("one verdict per criterion is needed")
    achieved = sum(p if m else 0 for p, m in zip(points, met))
    possible = sum(p for p in points if p > 0)
    raw = achieved / possible if possible > 0 else 0.0
    return RubricScore(raw=raw, achieved=achieved, possible=possible)


def _tag(tags: Sequence[str], prefix: str) -> str:
    """The value of the first ``prefix:value`` tag, as PostTrainBench's ``theme`` / ``axis``
    properties (``data_loader.py:14-20,52-57``)."""
    for tag in tags:
        if tag.startswith(prefix + TAG_SEP):
            return tag.split(TAG_SEP)[1]
    return "unknown"


@dataclass(frozen=True)
class GradedResponse:
    """One response's grading, as PostTrainBench's ``ExampleResult``: ``score`` is its
    ``normalized_score``; ``criteria_met`` has one verdict per rubric criterion (a
    criterion the grader could not grade is False), or none when the response was not
    graded (a guard refused it)."""

    score: float
    criteria_met: tuple[bool, ...] = ()


def _clip01(x: Any) -> float:
    import numpy as np

    return float(np.clip(x, 0, 1))


def bootstrap_stderr(scores: Sequence[float], n_bootstrap: int = 1000) -> float:
    """PostTrainBench's stderr (``scoring.py:84-97``): the std of 1000 clipped bootstrap
    means, numpy's default_rng(42)."""
    import numpy as np

    if len(scores) < 2:
        return 0.0
    arr = np.array(scores)
    rng = np.random.default_rng(42)
    means = [
        np.clip(np.mean(rng.choice(arr, size=len(arr), replace=True)), 0, 1)
        for _ in range(n_bootstrap)
    ]
    return float(np.std(means))


def ptb_metrics(
    rubrics: Sequence[Sequence[Mapping[str, Any]]],
    example_tags: Sequence[Sequence[str]],
    graded: Sequence[GradedResponse],
) -> dict[str, Any]:
    """PostTrainBench's HealthBench metrics (``evaluate.py:262-273``, ``scoring.py:26-159``):
    ``accuracy`` (mean score clipped to [0, 1]), ``stderr`` (bootstrap), ``n_examples``,
    ``total_grader_calls`` (criteria graded), ``by_theme`` and ``by_axis``.

    *rubrics*, *example_tags*: each response's conversation's (``Sample.data``).
    """
    import numpy as np

    if not (len(rubrics) == len(example_tags) == len(graded)):
        raise ValueError("one rubric, tag list and grading per response is needed")
    if not graded:
        return {
            "accuracy": 0.0,
            "stderr": 0.0,
            "n_examples": 0,
            "total_grader_calls": 0,
            "by_theme": {},
            "by_axis": {},
        }
    scores = [g.score for g in graded]
    themes: dict[str, list[float]] = defaultdict(list)
    for tags, g in zip(example_tags, graded):
        themes[_tag(tags, "theme")].append(g.score)
    axes: dict[str, list[tuple[Any, bool]]] = defaultdict(list)
    for rubric, g in zip(rubrics, graded):
        for item, met in zip(rubric, g.criteria_met):
            axes[_tag(item.get("tags", []), "axis")].append((item["points"], met))
    by_axis = {}
    for axis, items in axes.items():
        possible = sum(p for p, _ in items if p > 0)
        if possible:
            by_axis[axis] = _clip01(sum(p for p, met in items if met) / possible)
    return {
        "accuracy": _clip01(np.mean(scores)),
        "stderr": bootstrap_stderr(scores),
        "n_examples": len(graded),
        "total_grader_calls": sum(len(g.criteria_met) for g in graded),
        "by_theme": {t: _clip01(float(np.mean(s))) for t, s in themes.items()},
        "by_axis": by_axis,
    }
