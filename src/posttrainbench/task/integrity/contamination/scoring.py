"""Overlap scores of one training record against one test item (decon SIMPLE style).

Each component's overlap is the share of its unique n-grams (question n=5, answer n=3,
passage n=4 cl100k tokens) found in the record; a component shorter than n counts as
one n-gram of its own length. The question carries the decision: the score is the
larger of the question overlap alone and decon's weighted combination (QA 0.75/0.25,
QP 0.85/0.15, QAP 0.7/0.2/0.1), so a verbatim question is contaminated on its own and
a matching answer can carry a partly edited question over the threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Grams = frozenset[tuple[int, ...]]


def ngrams(tokens: list[int], n: int) -> Grams:
    """Unique n-grams of a token list; a list shorter than n is one gram of itself."""
    if not tokens:
        return frozenset()
    if len(tokens) < n:
        return frozenset([tuple(tokens)])
    return frozenset(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def weights(has_answer: bool, has_passage: bool) -> tuple[float, float, float]:
    """decon's component weights for a Q, QA, QP or QAP item."""
    if has_answer and has_passage:
        return 0.7, 0.2, 0.1
    if has_answer:
        return 0.75, 0.25, 0.0
    if has_passage:
        return 0.85, 0.0, 0.15
    return 1.0, 0.0, 0.0


def min_question_overlap(has_answer: bool, has_passage: bool, threshold: float) -> float:
    """The smallest question overlap that can still reach the threshold."""
    wq, wa, wp = weights(has_answer, has_passage)
    return max(0.0, min(threshold, (threshold - wa - wp) / wq))


@dataclass(frozen=True)
class ItemGrams:
    """A test item's n-gram sets and the question hits it needs to be matched at all."""

    question: Grams
    answer: Grams | None
    passage: Grams | None
    min_question_hits: int

    @classmethod
    def build(
        cls, question: Grams, answer: Grams | None, passage: Grams | None, threshold: float
    ) -> ItemGrams:
        q_min = min_question_overlap(bool(answer), bool(passage), threshold)
        hits = max(1, math.ceil(q_min * len(question) - 1e-9))
        return cls(question, answer or None, passage or None, hits)


@dataclass
class DocGrams:
    """A record's token list with its n-gram sets computed on demand."""

    tokens: list[int]
    _sets: dict[int, Grams] = field(default_factory=dict)

    def has(self, gram: tuple[int, ...]) -> bool:
        n = len(gram)
        if n not in self._sets:
            self._sets[n] = frozenset(
                tuple(self.tokens[i : i + n]) for i in range(len(self.tokens) - n + 1)
            )
        return gram in self._sets[n]


@dataclass(frozen=True)
class Overlap:
    """Scores of one record against one item."""

    score: float
    question: float
    answer: float | None
    passage: float | None


def _share(grams: Grams, doc: DocGrams) -> float:
    return sum(1 for g in grams if doc.has(g)) / len(grams)


def overlap(item: ItemGrams, doc: DocGrams) -> Overlap | None:
    """The record's overlap with the item, or None when the question barely matches."""
    if not item.question:
        return None
    q_hits = sum(1 for g in item.question if doc.has(g))
    if q_hits < item.min_question_hits:
        return None
    q = q_hits / len(item.question)
    a = _share(item.answer, doc) if item.answer else None
    p = _share(item.passage, doc) if item.passage else None
    wq, wa, wp = weights(a is not None, p is not None)
    combined = wq * q + wa * (a or 0.0) + wp * (p or 0.0)
    return Overlap(score=max(q, combined), question=q, answer=a, passage=p)
