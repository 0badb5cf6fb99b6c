"""Forms of the test items that a training file may hold instead of their plain text.

Transforms that map text to text one character at a time leave the n-gram check
nothing to decode: the check matches the transformed item instead. Each reference item
is matched as itself and as

- ``ptb_clean``: PostTrainBench's normalisation (lowercase, punctuation to spaces), so
  a record stripped that way is caught as PostTrainBench's checker catches it;
- ``rot13``: letters rotated by 13 (``codecs.encode(text, "rot13")``);
- ``reversed``: the text read backwards (``text[::-1]``).

A variant that equals the plain item (no punctuation, no letters) is left out. Matches
are reported against the original item's index, with the variant named.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass

from posttrainbench.task.integrity.contamination.normalize import normalize_text, ptb_clean_text
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
from posttrainbench.task.integrity.contamination.report import RecordMatch

TRANSFORMS: dict[str, Callable[[str], str]] = {
    "ptb_clean": ptb_clean_text,
    "rot13": lambda text: codecs.encode(text, "rot13"),
    "reversed": lambda text: text[::-1],
}


@dataclass(frozen=True)
class ExpandedReference:
    """The items to index: each original, then its variants; where each came from."""

    items: list[ReferenceItem]
    origin: list[int]  # index into the original reference
    variant: list[str | None]  # None: the item as given


def expand(
    reference: list[ReferenceItem], names: tuple[str, ...] | None = None
) -> ExpandedReference:
    """Every item of *reference* and its variants (*names*: default all of TRANSFORMS)."""
    items, origin, variant = list(reference), list(range(len(reference))), [None] * len(reference)
    chosen: list[str | None] = list(variant)
    for name in names if names is not None else tuple(TRANSFORMS):
        transform = TRANSFORMS[name]
        for i, item in enumerate(reference):
            form = ReferenceItem(
                question=transform(item.question),
                answer=None if item.answer is None else transform(item.answer),
                passage=None if item.passage is None else transform(item.passage),
            )
            if normalize_text(form.question) == normalize_text(item.question):
                continue  # the same text: the plain item already covers it
            items.append(form)
            origin.append(i)
            chosen.append(name)
    return ExpandedReference(items, origin, chosen)


def fold(
    matches: list[RecordMatch],
    expanded: ExpandedReference,
    reference: list[ReferenceItem],
    snippet_chars: int,
) -> list[RecordMatch]:
    """Matches against the original items: one per record and item, the best-scoring form."""
    best: dict[tuple[str, str, int], RecordMatch] = {}
    for match in matches:
        i = match.test_index
        item = expanded.origin[i]
        folded = match.model_copy(
            update={
                "test_index": item,
                "test_question": reference[item].question[:snippet_chars],
                "variant": expanded.variant[i],
            }
        )
        key = (match.source, match.locator, item)
        if key not in best or folded.score > best[key].score:
            best[key] = folded
    return list(best.values())
