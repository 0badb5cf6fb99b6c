"""Answer extraction shared by the math and multiple-choice benchmarks (stdlib only).

* :func:`last_boxed` / :func:`boxed_integer`: the content of the last ``\\boxed{...}``
  (nested braces handled) and its value as an integer.
* :func:`last_integer`: the last number in free text, when it is a whole number.
* :func:`extract_letter`: a multiple-choice letter from an ``ANSWER: X`` line, with
  fallbacks for the usual ways models state a choice.
* :func:`integer_hedge` / :func:`letter_hedge`: why a completion offers several final
  answers at once (the scorers give it 0 and report :data:`HEDGE_FINDING`). One
  correction is not a hedge: the last answer counts, as before.
"""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# Wrappers and decorations removed from a boxed answer before reading it as an integer.
_BOX_NOISE = re.compile(
    r"\\text\{|\\mathrm\{|\\textbf\{|\\mathbf\{|[{}$\s]|\\[,!;: ]|\^\\circ|\^\{\\circ\}|\\%|%"
)
_INT_TEXT = re.compile(r"-?\d+(?:\.0+)?")
HEDGE_FINDING = "hedged_answer"
HEDGE_MIN_ANSWERS = 3  # different final answers stated (two is a correction)
# Two answers joined as alternatives: "12 or 13", "12, 13", "12/13", "(A) or (B)", "A and C".
_ALTERNATIVES = (
    r"\s*(?:,(?!\d{3}(?!\d))|;|/|&|\||\bor\b|\band\b|\\text\{\s*or\s*\}|\\lor|\\vee)\s*"
    r"(?:(?:maybe|possibly|perhaps)\s+)?"
)  # a comma before three digits separates thousands
_INTEGER_PAIR = re.compile(r"(?<![\d.])(\d+)" + _ALTERNATIVES + r"(\d+)(?![\d.])")


def boxed_contents(text: str) -> list[str]:
    """Contents of every complete ``\\boxed{...}`` (or ``\\fbox{...}``), in order.

    Braces are matched by depth, so ``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``.
    A box left unclosed (a truncated completion) is skipped.
    """
    contents = []
    for m in _BOXED.finditer(text):
        depth = 1
        for i in range(m.end(), len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    contents.append(text[m.end() : i])
                    break
    return contents


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (see :func:`boxed_contents`), or None."""
    contents = boxed_contents(text)
    return contents[-1] if contents else None


def parse_integer(text: str) -> int | None:
    """``text`` as an integer after dropping LaTeX noise (``\\text{}``, ``$``, ``^\\circ``,
    thousands separators); None when it is not a whole number."""
    cleaned = _BOX_NOISE.sub("", text)
    cleaned = re.sub(r"(?<=\d),(?=\d{3}\b)", "", cleaned).rstrip(".")
    if not _INT_TEXT.fullmatch(cleaned):
        return None
    return int(float(cleaned)) if "." in cleaned else int(cleaned)


def boxed_integer(text: str) -> int | None:
    """The integer in the last ``\\boxed{}``; None if there is no box or it is not an integer."""
    content = last_boxed(text)
    return None if content is None else parse_integer(content)


def last_integer(text: str) -> int | None:
    """The last number in *text* if it is a whole number (``3.5`` at the end gives None)."""
    matches = _NUMBER.findall(text.replace(",", ""))
    if not matches:
        return None
    last = matches[-1]
    if "." in last:
        whole, _, frac = last.partition(".")
        return int(whole) if set(frac) == {"0"} else None
    return int(last)


# --- multiple choice -------------------------------------------------------------

# "ANSWER: B", "Answer: (B)", "**Answer:** B", "answer: $B$" (letter not followed by a letter)
_ANSWER_LINE = re.compile(r"(?i:answer)\s*\**\s*[:：]\s*\**\s*[\s($\[{*]*\s*([A-D])(?![A-Za-z])")
# "the answer is B", "correct option is (C)", "The correct choice would be D"
_ANSWER_IS = re.compile(
    r"(?i:answer|option|choice)\s+(?i:is|would\s+be|should\s+be)\s*:?\s*\**\s*[($\[{]?\s*([A-D])(?![A-Za-z])"
)
_BOXED_LETTER = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*\(?([A-D])\)?\s*\}?\s*\}")
# a last line that is only a letter ("B", "B.", "(B)", "**B**"), or a text ending in "(B)"
_LETTER_LINE = re.compile(r"[*\s]*\(?([A-D])\)?[.*\s]*")
_FINAL_PAREN = re.compile(r"\(([A-D])\)[.*\s]*$")


def extract_letter(text: str, letters: str = "ABCD") -> str | None:
    """The chosen letter in *text*, or None.

    Preference: the last ``ANSWER: X`` line (the requested format); then the last
    "answer is X"; then the last ``\\boxed{X}``; then a last line that is only a
    letter, or a text ending in ``(X)``. Letters must be upper case so that prose like
    "answer is a ratio" is not read as a choice.
    """
    for pattern in (_ANSWER_LINE, _ANSWER_IS, _BOXED_LETTER):
        found = [m.group(1) for m in pattern.finditer(text) if m.group(1) in letters]
        if found:
            return found[-1]
    stripped = text.rstrip()
    last_line = stripped.rsplit("\n", 1)[-1]
    m = _LETTER_LINE.fullmatch(last_line) or _FINAL_PAREN.search(stripped)
    if m and m.group(1) in letters:
        return m.group(1)
    return None


def integer_hedge(text: str) -> str | None:
    """Why *text* offers several integer answers at once, or None.

    Hedges: a last box holding alternatives (``\\boxed{12 \\text{ or } 13}``), three or
    more boxes with different integers, or (without a box) a last line ending in
    alternatives (``it is 12 or 13``).
    """
    boxes = boxed_contents(text)
    if boxes:
        if parse_integer(boxes[-1]) is None and _INTEGER_PAIR.search(boxes[-1]):
            return f"the last box holds alternatives: {boxes[-1][:40]!r}"
        values = {v for v in map(parse_integer, boxes) if v is not None}
        if len(values) >= HEDGE_MIN_ANSWERS:
            return f"{len(values)} different boxed answers"
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    pair = _INTEGER_PAIR.search(lines[-1]) if lines else None
    if pair and pair.group(1) != pair.group(2) and not re.search(r"\d", lines[-1][pair.end() :]):
        return f"the last line ends in alternatives: {pair.group(0)!r}"
    return None


_LETTER_PAIR = re.compile(r"\(?([A-D])\)?" + _ALTERNATIVES + r"\(?([A-D])\b")


def letter_hedge(text: str, letters: str = "ABCD") -> str | None:
    """Why *text* offers several choices at once, or None.

    Hedges: the last answer statement (``ANSWER: X``, "the answer is X", ``\\boxed{X}``)
    naming alternatives (``ANSWER: A or B``, ``ANSWER: (A), (C)``), or statements
    naming three or more different letters.
    """
    statements = sorted(
        (
            m
            for p in (_ANSWER_LINE, _ANSWER_IS, _BOXED_LETTER)
            for m in p.finditer(text)
            if m.group(1) in letters
        ),
        key=lambda m: m.start(1),
    )
    if not statements:
        return None
    named = {m.group(1) for m in statements}
    if len(named) >= HEDGE_MIN_ANSWERS:
        return f"answer statements name {len(named)} different choices ({''.join(sorted(named))})"
    last = statements[-1]
    segment = re.split(r"[\n.;:]", text[last.start(1) :], maxsplit=1)[0]
    pair = _LETTER_PAIR.match(segment)
    if pair and pair.group(1) != pair.group(2) and pair.group(2) in letters:
        return f"the final answer names alternatives: {segment[:40]!r}"
    return None
