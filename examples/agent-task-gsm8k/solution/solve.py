"""Improved GSM8K solver for the agent-task example (what the scripted optimizer commits).

Still no model: it reads numbers (digits and number words), turns relative phrases
("half as many", "twice as much", "3 times as many", "80% more") into new quantities,
and picks an operation from cue words: a running total, a product for rates ("per",
"each", "every", "times a week"), or what is left after spending. Reads JSONL
{"id", "question"} on stdin, writes JSONL {"id", "answer"} on stdout.
"""

import json
import math
import re
import sys

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "dozen": 12, "twice": 2, "double": 2,
         "doubled": 2, "triple": 3, "half": 0.5}
TOKEN = re.compile(r"\$?\d[\d,]*(?:\.\d+)?%?|[a-z]+")
RELATIVE = re.compile(r"(half|twice|double|triple|\d+(?:\.\d+)?%?|[a-z]+) (?:times )?as (?:many|much)|"
                      r"half that (?:many|much)|(\d+(?:\.\d+)?)% more")
TOTAL_CUES = ("altogether", "in total", "in all", "total", "together", "combined")
REST_CUES = ("left", "remain", "remaining", "remainder", "change")
RATE_CUES = ("per ", "each", "every", "an hour", "a week", "a day", "times a")


def numbers(text: str) -> list[float]:
    """Every quantity in reading order (digits, percentages as fractions, number words)."""
    values = []
    for token in TOKEN.findall(text.lower()):
        if token[0] in "$0123456789":
            value = float(token.lstrip("$").rstrip("%").replace(",", ""))
            values.append(value / 100 if token.endswith("%") else value)
        elif token in WORDS and token not in ("half", "twice", "double", "doubled", "triple"):
            values.append(float(WORDS[token]))
    return values


def relative_quantities(text: str, base: list[float]) -> list[float]:
    """New quantities from relative phrases, each applied to the quantity before it."""
    extra = []
    for match in RELATIVE.finditer(text.lower()):
        before = numbers(text.lower()[: match.start()])
        if not before:
            continue
        previous = before[-1]
        phrase = match.group(0)
        if match.group(2):
            extra.append(previous * (1 + float(match.group(2)) / 100))
        elif phrase.startswith("half"):
            extra.append(previous / 2)
        else:
            factor = WORDS.get(match.group(1) or "", None)
            if factor is None:
                try:
                    factor = float((match.group(1) or "").rstrip("%"))
                except ValueError:
                    continue
            extra.append(previous * factor)
    return extra


def solve(question: str) -> float:
    """One answer from cue words; falls back to the sum of the quantities."""
    text = question.lower()
    base = numbers(question)
    if not base:
        return 0.0
    extra = relative_quantities(question, base)
    if extra:
        # "A has 48, B has half as many: how many altogether" -> the first quantity plus the new ones.
        return base[0] + sum(extra)
    if "half of" in text and any(cue in text for cue in REST_CUES):
        # "has 303 and 453, gives away half of them: how many are left" -> half the total.
        return sum(base) / 2
    if any(cue in text for cue in REST_CUES) and len(base) >= 2:
        return max(base[0] - sum(base[1:]), 0.0)
    if any(cue in text for cue in RATE_CUES) and len(base) <= 3:
        return math.prod(base)
    return sum(base)


def fmt(value: float) -> str:
    """Integers without a decimal point."""
    value = round(value, 6)
    return str(int(value)) if value == int(value) else str(value)


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            item = json.loads(line)
            print(json.dumps({"id": item["id"], "answer": fmt(solve(item["question"]))}), flush=True)


if __name__ == "__main__":
    main()
