"""BFCL v4 ``simple_python`` from the ``bfcl-eval`` wheel (data files only)."""

from __future__ import annotations

import json

from ..base import Sample
from ..fetch import Fetcher, wheel_member
from ..source import DataSource

REQUIREMENT = "bfcl-eval==2026.3.23"
CATEGORY = "simple_python"


def _jsonl(body: bytes) -> list[dict]:
    # split on "\n" only: str.splitlines() also breaks at U+2028 inside JSON strings
    return [json.loads(line) for line in body.decode("utf-8").split("\n") if line.strip()]


class BfclSource(DataSource):
    benchmark_id = "bfcl"
    provenance = f"PyPI {REQUIREMENT}: bfcl_eval/data/BFCL_v4_{CATEGORY}.json + possible_answer"

    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        wheel = fetcher.wheel(REQUIREMENT)
        name = f"BFCL_v4_{CATEGORY}.json"
        questions = _jsonl(wheel_member(wheel, f"bfcl_eval/data/{name}"))
        answers = {a["id"]: a["ground_truth"] for a in _jsonl(wheel_member(wheel, f"data/possible_answer/{name}"))}
        test = []
        for q in questions:
            if q["id"] not in answers:
                raise ValueError(f"{name}: no possible answer for {q['id']}")
            test.append(Sample(id=q["id"], category=CATEGORY, data={
                "question": q["question"][0], "function": q["function"], "ground_truth": answers[q["id"]]}))
        return {"test": test}
