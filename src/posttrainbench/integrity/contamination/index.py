"""The reference index: every test item's n-grams, and a lookup from question n-gram to items."""

from __future__ import annotations

from dataclasses import dataclass

from posttrainbench.integrity.contamination.normalize import normalize_text
from posttrainbench.integrity.contamination.reference import ReferenceItem
from posttrainbench.integrity.contamination.report import CheckSettings
from posttrainbench.integrity.contamination.scoring import ItemGrams, ngrams
from posttrainbench.integrity.contamination.tokens import cl100k


@dataclass
class ReferenceIndex:
    """Test items tokenized once; shared (read-only) by every worker."""

    settings: CheckSettings
    items: list[ReferenceItem]
    grams: list[ItemGrams]
    question_texts: list[str]  # normalized, as tokenized
    by_question_gram: dict[tuple[int, ...], list[int]]
    question_gram_lengths: tuple[int, ...]

    @classmethod
    def build(
        cls, items: list[ReferenceItem], settings: CheckSettings | None = None
    ) -> ReferenceIndex:
        """Tokenize every item's components with cl100k and index its question n-grams."""
        settings = settings or CheckSettings()
        enc = cl100k()

        def grams_of(text: str | None, n: int):
            if not text:
                return None
            return ngrams(enc.encode_ordinary(normalize_text(text)), n) or None

        grams, texts = [], []
        lookup: dict[tuple[int, ...], list[int]] = {}
        for i, item in enumerate(items):
            question = normalize_text(item.question)
            q = ngrams(enc.encode_ordinary(question), settings.question_n)
            entry = ItemGrams.build(
                q,
                grams_of(item.answer, settings.answer_n),
                grams_of(item.passage, settings.passage_n),
                settings.threshold,
            )
            grams.append(entry)
            texts.append(question)
            for g in q:
                lookup.setdefault(g, []).append(i)
        return cls(settings, items, grams, texts, lookup, tuple(sorted({len(g) for g in lookup})))

    def candidate_items(self, doc_tokens: list[int]) -> set[int]:
        """Items sharing at least one question n-gram with a token list (any gram length)."""
        found: set[int] = set()
        for n in self.question_gram_lengths:
            for i in range(len(doc_tokens) - n + 1):
                hit = self.by_question_gram.get(tuple(doc_tokens[i : i + n]))
                if hit:
                    found.update(hit)
        return found
