"""BFCL v4 ``simple_python`` from the ``bfcl-eval`` wheel (data files only)."""

from __future__ import annotations

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, wheel_file

REQUIREMENT = "bfcl-eval==2026.3.23"
CATEGORY = "simple_python"
NAME = f"BFCL_v4_{CATEGORY}.json"  # JSON Lines, despite the suffix
QUESTIONS = SourceFile(
    "questions",
    f"bfcl_eval/data/{NAME}",
    ("id", "question", "function"),
    layouts=(NAME, f"data/{NAME}"),
)
ANSWERS = SourceFile(
    "answers",
    f"bfcl_eval/data/possible_answer/{NAME}",
    ("id", "ground_truth"),
    layouts=(f"possible_answer/{NAME}", f"data/possible_answer/{NAME}"),
)


class BfclSource(DataSource):
    benchmark_id = "bfcl"
    provenance = f"PyPI {REQUIREMENT}: bfcl_eval/data/{NAME} + possible_answer"
    files = (QUESTIONS, ANSWERS)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {f.role: wheel_file(fetcher, REQUIREMENT, f) for f in self.files}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        answers = {a["id"]: a["ground_truth"] for a in rows["answers"]}
        test = []
        for q in rows["questions"]:
            if q["id"] not in answers:
                raise ValueError(f"{NAME}: no possible answer for {q['id']}")
            test.append(
                Sample(
                    id=q["id"],
                    category=CATEGORY,
                    data={
                        "question": q["question"][0],
                        "function": q["function"],
                        "ground_truth": answers[q["id"]],
                    },
                )
            )
        return {"test": test}
