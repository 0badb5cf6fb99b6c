"""GSM8K hedge detection, and lm-eval-harness's ``gsm8k`` answer extraction.

:func:`hedge` finds completions that name several final answers at once (a trained
model's way to let a last-number rule pick from a list); the scorer gives them 0.
Neither inspect nor lm-eval has such a rule: they score them like any other output.

The lm-eval part is no longer the score (that is inspect's ``match``, see
:mod:`.inspect_match`); tests/security/test_scorer_answers.py still uses :func:`judge`
as its plain last-number control. lm-eval (task version 3.0) filters a completion with
two regexes and compares the result with the reference answer text by ``exact_match``
after removing ``,``, ``$``, everything up to ``#### `` and one trailing ``.``,
case-insensitively:

* ``strict-match``: the first ``#### <number>``;
* ``flexible-extract``: the last number-like token (``-?[$0-9.,]{2,}`` or ``-?[0-9]+``).

A completion with no match becomes ``[invalid]``. Stdlib only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INVALID = "[invalid]"
STRICT_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
# lm-eval gsm8k.yaml ``regexes_to_ignore``, applied in this order to both sides.
IGNORED_PATTERNS = (",", r"\$", r"(?s).*#### ", r"\.$")


def _regex_filter(pattern: re.Pattern[str], text: str, group_select: int) -> str:
    """lm-eval's ``RegexFilter`` for one response: findall, pick one match, first non-empty group."""
    matches = pattern.findall(text)
    if not matches:
        return INVALID
    match = matches[group_select]
    if isinstance(match, tuple):  # several groups: the first that matched
        groups = [g for g in match if g]
        match = groups[0] if groups else INVALID
    return match.strip()


def strict_extract(completion: str) -> str:
    """The ``strict-match`` filter: the number after the first ``#### ``."""
    return _regex_filter(STRICT_PATTERN, completion, 0)


def flexible_extract(completion: str) -> str:
    """The ``flexible-extract`` filter: the last number-like token."""
    return _regex_filter(FLEXIBLE_PATTERN, completion, -1)


def normalize(text: str) -> str:
    """lm-eval's ``exact_match`` normalisation for gsm8k (ignored regexes, then lower case)."""
    for pattern in IGNORED_PATTERNS:
        text = re.sub(pattern, "", text)
    return text.lower()


def exact_match(prediction: str, reference: str) -> bool:
    """lm-eval's gsm8k ``exact_match`` for one pair; *reference* is the full answer text."""
    return normalize(prediction) == normalize(reference)


@dataclass(frozen=True)
class Gsm8kVerdict:
    """Both lm-eval filters' extractions and verdicts for one completion."""

    strict: str
    flexible: str
    strict_correct: bool
    flexible_correct: bool


def judge(completion: str, reference: str) -> Gsm8kVerdict:
    """Extract with both filters and compare each with *reference* (the full GSM8K answer)."""
    strict, flexible = strict_extract(completion), flexible_extract(completion)
    return Gsm8kVerdict(
        strict, flexible, exact_match(strict, reference), exact_match(flexible, reference)
    )


HEDGE_MIN_LISTED = 10  # distinct numbers on a last line without arithmetic: a list of guesses
HEDGE_MIN_ANSWERS = 3  # distinct "####" answers (two is a correction, the last counts)
_HASH_LINE = re.compile(r"####([^\n]*)")
# A final-answer line: "#### 42" (GSM8K's own format) or inspect's "ANSWER: 42".
_ANSWER_LINE = re.compile(r"(?:####|\bANSWER\s*:)([^\n]*)", re.IGNORECASE)
_ARITHMETIC = re.compile(r"[=+*/×÷]")
_CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations, e.g. <<9*2=18>>


def _numbers(text: str) -> list[str]:
    """The normalised number-like tokens of *text* (lm-eval's flexible pattern)."""
    tokens = ["".join(groups) for groups in FLEXIBLE_PATTERN.findall(text)]
    return [n for n in (normalize(t) for t in tokens) if any(c.isdigit() for c in n)]


def hedge(completion: str) -> str | None:
    """Why *completion* offers several final answers at once, or None.

    Hedges: a last answer line (``####`` or ``ANSWER:``) naming more than one number
    without arithmetic; three or more different ``####`` answers; a last line listing
    many numbers with no arithmetic in it.
    """
    text = _CALCULATOR.sub("", completion)
    answers = _ANSWER_LINE.findall(text)
    if answers:
        last = set(_numbers(answers[-1]))
        if len(last) > 1 and not _ARITHMETIC.search(answers[-1]):
            return f"the last answer line names {len(last)} numbers"
    firsts = {nums[0] for nums in map(_numbers, _HASH_LINE.findall(text)) if nums}
    if len(firsts) >= HEDGE_MIN_ANSWERS:
        return f"{len(firsts)} different #### answers"
    lines = [line for line in completion.splitlines() if line.strip()]
    if lines and not _ARITHMETIC.search(lines[-1]):
        listed = set(_numbers(lines[-1]))
        if len(listed) >= HEDGE_MIN_LISTED:
            return f"the last line lists {len(listed)} numbers"
    return None
