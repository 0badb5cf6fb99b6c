"""Contamination-checker throughput: the fast checker vs the straightforward pure-Python one.

Generates a multi-GB JSONL corpus of chat records (real GSM8K training problems, the
hardest case for the prefilter since they share the test set's style and vocabulary,
mixed with Python standard-library source and docstrings), plants a few test items at
known lines, and measures in one run:

  * the naive checker (tokenize every record) on a prefix of the corpus,
  * the fast checker on the whole corpus with one worker (per-core MB/s),
  * the fast checker on the whole corpus with one worker per CPU,

then prints MB/s, the per-core speed-up, and whether each found exactly the planted items.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import sysconfig
import time
from pathlib import Path

from posttrainbench.integrity.contamination.check import check_inputs, default_workers
from posttrainbench.integrity.contamination.naive import naive_check
from posttrainbench.integrity.contamination.reference import ReferenceItem

REPO = Path(__file__).resolve().parents[2]
GSM8K = REPO.parent / "shared" / "data" / "gsm8k"


def base_records(rng: random.Random) -> list[str]:
    """About 25 MB of distinct chat records from local text (no download)."""
    records = []
    for line in (GSM8K / "train.jsonl").read_text().splitlines():
        row = json.loads(line)
        records.append(
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": row["question"]},
                        {"role": "assistant", "content": row["answer"]},
                    ]
                }
            )
        )
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for start in range(0, min(len(text), 40_000), 2_000):
            chunk = text[start : start + 2_000]
            records.append(
                json.dumps(
                    {
                        "messages": [
                            {"role": "user", "content": f"Explain this code from {path.name}:"},
                            {"role": "assistant", "content": chunk},
                        ]
                    }
                )
            )
    rng.shuffle(records)
    return records


def write_corpus(
    path: Path, gigabytes: float, reference: list[ReferenceItem], rng: random.Random, planted: int
) -> tuple[list[int], int]:
    """Write the corpus; return the planted test-item indexes and the corpus size."""
    block = ("\n".join(base_records(rng)) + "\n").encode()
    target = int(gigabytes * 1e9)
    n_blocks = max(1, target // len(block))
    items = sorted(rng.sample(range(len(reference)), planted))
    plant_at = {rng.randrange(n_blocks): i for i in items}
    with path.open("wb") as handle:
        for b in range(n_blocks):
            handle.write(block)
            if b in plant_at:
                item = reference[plant_at[b]]
                handle.write(
                    (
                        json.dumps(
                            {
                                "messages": [
                                    {"role": "user", "content": item.question},
                                    {"role": "assistant", "content": item.answer},
                                ]
                            }
                        )
                        + "\n"
                    ).encode()
                )
    return sorted(plant_at.values()), path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=2.0, help="corpus size in GB")
    parser.add_argument(
        "--naive-mb", type=float, default=40.0, help="prefix the naive checker reads"
    )
    parser.add_argument("--planted", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "bench" / "contamination")
    args = parser.parse_args()
    if not (GSM8K / "test.jsonl").exists():
        print(f"needs GSM8K at {GSM8K}", file=sys.stderr)
        return 1
    rng = random.Random(0)
    reference = [
        ReferenceItem(question=r["question"], answer=r["answer"])
        for r in map(json.loads, (GSM8K / "test.jsonl").read_text().splitlines())
    ]
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.workdir / "corpus.jsonl"
    started = time.perf_counter()
    planted, size = write_corpus(corpus, args.gb, reference, rng, args.planted)
    print(
        f"corpus: {size / 1e9:.2f} GB, {args.planted} planted test items, written in "
        f"{time.perf_counter() - started:.0f} s; reference: GSM8K test, {len(reference)} items"
    )

    prefix = args.workdir / "prefix.jsonl"
    with corpus.open("rb") as src:
        data = src.read(int(args.naive_mb * 1e6))
    prefix.write_bytes(data[: data.rfind(b"\n") + 1])

    naive = naive_check(reference, [prefix])
    fast_prefix = check_inputs(reference, [prefix], workers=1)
    same = sorted((m.locator, m.test_index) for m in naive.matches) == sorted(
        (m.locator, m.test_index) for m in fast_prefix.matches
    )
    one = check_inputs(reference, [corpus], workers=1)
    cores = default_workers()
    many = check_inputs(reference, [corpus], workers=cores)

    def rate(report) -> float:
        return report.bytes_scanned / 1e6 / report.seconds

    found_one = sorted(set(one.contaminated_test_items)) == planted
    found_many = sorted(set(many.contaminated_test_items)) == planted
    ratio = rate(one) / rate(naive)
    print(
        f"naive pure-Python checker : {rate(naive):8.1f} MB/s  ({naive.bytes_scanned / 1e6:.0f} MB prefix, "
        f"{naive.seconds:.1f} s)"
    )
    print(
        f"fast checker, 1 worker    : {rate(one):8.1f} MB/s  ({one.seconds:.1f} s, index build included)"
    )
    print(
        f"fast checker, {cores} workers   : {rate(many):8.1f} MB/s  ({many.seconds:.1f} s) = "
        f"{rate(many) / cores:.1f} MB/s per core"
    )
    print(
        f"speed-up per core (fast 1 worker / naive): {ratio:.1f}x  [target >= 20x: "
        f"{'met' if ratio >= 20 else 'NOT met'}]; per-core rate target >= 50 MB/s: "
        f"{'met' if rate(one) >= 50 else 'NOT met'}"
    )
    print(
        f"agreement on the prefix: {'identical matches' if same else 'DIFFERENT'}; planted items found: "
        f"1 worker {'all, nothing else' if found_one else one.contaminated_test_items}, "
        f"{cores} workers {'all, nothing else' if found_many else many.contaminated_test_items}"
    )
    if not os.environ.get("PTB_BENCH_KEEP"):
        corpus.unlink()
        prefix.unlink()
    return 0 if same and found_one and found_many else 1


if __name__ == "__main__":
    sys.exit(main())
