"""GSM8K from OpenAI's ``grade-school-math`` repository (``test.jsonl`` / ``train.jsonl``).

The Hugging Face dataset ``openai/gsm8k`` holds the same rows as Parquet
(``main/{test,train}-*.parquet``); ``ptb data import`` reads either layout.
"""

from __future__ import annotations

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, url_file

CATEGORY = "gsm8k"
DEV_SIZE = 250  # the last items of train: a natural held-out split disjoint from test
COLUMNS = ("question", "answer")
TEST = SourceFile("test", "test.jsonl", COLUMNS, layouts=("main/test-*.parquet",))
TRAIN = SourceFile("train", "train.jsonl", COLUMNS, layouts=("main/train-*.parquet",))


def target_of(answer: str) -> str:
    """The numeric answer after ``####`` in a GSM8K solution, without thousands separators."""
    if "####" not in answer:
        raise ValueError(f"GSM8K answer without '####': {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _samples(rows: list[Row], split: str) -> list[Sample]:
    """One sample per row; ids carry the row's index in its file."""
    return [
        Sample(
            id=f"gsm8k_{split}_{i}",
            category=CATEGORY,
            data={
                "question": row["question"],
                "answer": row["answer"],
                "target": target_of(row["answer"]),
            },
        )
        for i, row in enumerate(rows)
    ]


class Gsm8kSource(DataSource):
    """Test: all 1319 test items in file order. Dev: the last 250 train items."""

    benchmark_id = "gsm8k"
    files = (TEST, TRAIN)
    # A class attribute so tests (and mirrors) can point it elsewhere.
    BASE_URL = (
        "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data"
    )

    @property
    def provenance(self) -> str:  # type: ignore[override]
        return f"{self.BASE_URL}/{{test,train}}.jsonl (dev = last {DEV_SIZE} train items)"

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {f.role: url_file(fetcher, f"{self.BASE_URL}/{f.name}") for f in self.files}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        return {
            "test": _samples(rows["test"], "test"),
            "dev": _samples(rows["train"], "train")[-DEV_SIZE:],
        }
