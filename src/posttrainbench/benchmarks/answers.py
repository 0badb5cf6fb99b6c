"""Answer extraction shared by the math and multiple-choice benchmarks (stdlib only).

* :func:`last_boxed` / :func:`boxed_integer`: the content of the last ``\\boxed{...}``
  (nested braces handled) and its value as an integer.
* :func:`last_integer`: the last number in free text, when it is a whole number.
* :func:`extract_letter`: a multiple-choice letter from an ``ANSWER: X`` line, with
  fallbacks for the usual ways models state a choice.
"""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# Wrappers and decorations removed from a boxed answer before reading it as an integer.
_BOX_NOISE = re.compile(r"\\text\{|\\mathrm\{|\\textbf\{|\\mathbf\{|[{}$\s]|\\[,!;: ]|\^\\circ|\^\{\\circ\}|\\%|%")
_INT_TEXT = re.compile(r"-?\d+(?:\.0+)?")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), or None.

    Braces are matched by depth, so ``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``.
    A box left unclosed (a truncated completion) is skipped: the last complete one counts.
    """
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
    return None


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
    r"(?i:answer|option|choice)\s+(?i:is|would\s+be|should\s+be)\s*:?\s*\**\s*[($\[{]?\s*([A-D])(?![A-Za-z])")
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
