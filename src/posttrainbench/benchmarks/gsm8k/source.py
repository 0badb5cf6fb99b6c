"""GSM8K from OpenAI's ``grade-school-math`` repository (``test.jsonl`` / ``train.jsonl``)."""

from __future__ import annotations

import json

from ..base import Sample
from ..fetch import Fetcher
from ..source import DataSource

CATEGORY = "gsm8k"
DEV_SIZE = 250  # the last items of train: a natural held-out split disjoint from test


def target_of(answer: str) -> str:
    """The numeric answer after ``####`` in a GSM8K solution, without thousands separators."""
    if "####" not in answer:
        raise ValueError(f"GSM8K answer without '####': {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _samples(body: bytes, split: str) -> list[Sample]:
    """One sample per JSONL row; ids carry the row's index in its file."""
    rows = [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]
    return [
        Sample(id=f"gsm8k_{split}_{i}", category=CATEGORY,
               data={"question": row["question"], "answer": row["answer"], "target": target_of(row["answer"])})
        for i, row in enumerate(rows)
    ]


class Gsm8kSource(DataSource):
    """Test: all 1319 test items in file order. Dev: the last 250 train items."""

    benchmark_id = "gsm8k"
    # A class attribute so tests (and mirrors) can point it elsewhere.
    BASE_URL = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data"

    @property
    def provenance(self) -> str:  # type: ignore[override]
        return f"{self.BASE_URL}/{{test,train}}.jsonl (dev = last {DEV_SIZE} train items)"

    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        test = _samples(fetcher.url(f"{self.BASE_URL}/test.jsonl"), "test")
        dev = _samples(fetcher.url(f"{self.BASE_URL}/train.jsonl"), "train")[-DEV_SIZE:]
        return {"test": test, "dev": dev}
