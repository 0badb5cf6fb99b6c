"""The reference index: every test item's n-grams, and a lookup from question n-gram to items."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from posttrainbench.task.integrity.contamination.normalize import normalize_text
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
from posttrainbench.task.integrity.contamination.report import CheckSettings
from posttrainbench.task.integrity.contamination.scoring import ItemGrams, ngrams

# Per item: the cl100k tokens of its normalized question, answer and passage (None: absent).
ItemTokens = tuple[list[int], list[int] | None, list[int] | None]


class LazyGrams(Sequence[ItemGrams]):
    """Each item's n-gram sets, built on first use: a check scores few items, if any."""

    def __init__(self, tokens: list[ItemTokens], settings: CheckSettings):
        self._tokens = tokens
        self._settings = settings
        self._built: dict[int, ItemGrams] = {}

    def __len__(self) -> int:
        return len(self._tokens)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i not in self._built:
            s = self._settings
            q, a, p = self._tokens[i]
            self._built[i] = ItemGrams.build(
                ngrams(q, s.question_n),
                (ngrams(a, s.answer_n) or None) if a else None,
                (ngrams(p, s.passage_n) or None) if p else None,
                s.threshold,
            )
        return self._built[i]


@dataclass
class ReferenceIndex:
    """Test items tokenized once; shared (read-only) by every worker."""

    settings: CheckSettings
    items: list[ReferenceItem]
    tokens: list[ItemTokens]
    grams: LazyGrams
    question_texts: list[str]  # normalized, as tokenized

    @classmethod
    def build(
        cls, items: list[ReferenceItem], settings: CheckSettings | None = None
    ) -> ReferenceIndex:
        """Tokenize every item's components with cl100k (n-grams are made on demand)."""
        from posttrainbench.task.integrity.contamination.tokens import cl100k

        enc = cl100k()

        def tokens_of(text: str | None) -> list[int] | None:
            return enc.encode_ordinary(normalize_text(text)) if text else None

        texts = [normalize_text(item.question) for item in items]
        tokens = [
            (enc.encode_ordinary(q), tokens_of(item.answer), tokens_of(item.passage))
            for q, item in zip(texts, items)
        ]
        return cls.from_tokens(items, tokens, settings, texts)

    @classmethod
    def from_tokens(
        cls,
        items: list[ReferenceItem],
        tokens: list[ItemTokens],
        settings: CheckSettings | None = None,
        question_texts: list[str] | None = None,
    ) -> ReferenceIndex:
        """The index of items whose tokens are known (e.g. from the on-disk cache)."""
        settings = settings or CheckSettings()
        texts = question_texts if question_texts is not None else []
        return cls(settings, items, tokens, LazyGrams(tokens, settings), texts)

    @functools.cached_property
    def by_question_gram(self) -> dict[tuple[int, ...], list[int]]:
        """Question n-gram -> the items whose question has it."""
        lookup: dict[tuple[int, ...], list[int]] = {}
        for i in range(len(self.grams)):
            for g in self.grams[i].question:
                lookup.setdefault(g, []).append(i)
        return lookup

    @functools.cached_property
    def question_gram_lengths(self) -> tuple[int, ...]:
        """The lengths of the question n-grams (short questions make shorter ones)."""
        return tuple(sorted({len(g) for g in self.by_question_gram}))

    def candidate_items(self, doc_tokens: list[int]) -> set[int]:
        """Items sharing at least one question n-gram with a token list (any gram length)."""
        found: set[int] = set()
        lookup = self.by_question_gram
        for n in self.question_gram_lengths:
            for i in range(len(doc_tokens) - n + 1):
                hit = lookup.get(tuple(doc_tokens[i : i + n]))
                if hit:
                    found.update(hit)
        return found
