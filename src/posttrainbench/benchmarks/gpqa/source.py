"""GPQA from the gated Hugging Face dataset ``Idavidrein/gpqa`` (CSV files, stdlib ``csv``).

Test: ``gpqa_main.csv`` (448 questions). Dev: the ``gpqa_extended.csv`` questions whose
``Record ID`` is not in main (extended is a superset of main). Choices are shuffled
here, once, with an RNG seeded by a fixed seed and the record id, so the order of a
question does not depend on file order, ``--limit`` or the machine.
"""

from __future__ import annotations

import random

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row, check_columns, read_rows
from ..source import DataSource, RawFile, SourceFile, hf_file

REPO = "Idavidrein/gpqa"
TEST_FILE = "gpqa_main.csv"
DEV_FILE = "gpqa_extended.csv"
COLUMNS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
    "Record ID",
)
TEST = SourceFile("test", TEST_FILE, COLUMNS)
EXTENDED = SourceFile("extended", DEV_FILE, COLUMNS)
SHUFFLE_SEED = 20231120  # fixed: part of the benchmark's definition
LETTERS = "ABCD"


def clean(text: str | None) -> str:
    """lm-eval's GPQA text cleanup: strip, ``" [title]"`` -> ``". "``, double spaces -> one."""
    if text is None:
        return " "
    return text.strip().replace(" [title]", ". ").replace("  ", " ")


def shuffled_choices(record_id: str, correct: str, incorrect: list[str]) -> tuple[list[str], str]:
    """(four choices in a seeded order, the correct letter); deterministic per record id."""
    options = [correct, *incorrect]
    order = list(range(len(options)))
    # A str seed is hashed with sha512 by ``random``: stable across processes and versions.
    random.Random(f"{SHUFFLE_SEED}:{record_id}").shuffle(order)
    return [options[i] for i in order], LETTERS[order.index(0)]


def _row_sample(row: Row) -> Sample:
    rid = row["Record ID"].strip()
    incorrect = [clean(row[f"Incorrect Answer {k}"]) for k in (1, 2, 3)]
    choices, letter = shuffled_choices(rid, clean(row["Correct Answer"]), incorrect)
    return Sample(
        id=f"gpqa_{rid}",
        category=row.get("High-level domain", "").strip(),
        data={
            "question": clean(row["Question"]),
            "choices": choices,
            "answer": letter,
            "subdomain": row.get("Subdomain", "").strip(),
            "record_id": rid,
        },
    )


def parse_csv(body: bytes) -> list[Sample]:
    """One sample per row of a GPQA CSV's bytes, in file order, checked as prepare does."""
    rows = read_rows(TEST_FILE, body)
    check_columns(rows, COLUMNS, "GPQA CSV")
    return [_row_sample(row) for row in rows]


class GpqaMainSource(DataSource):
    benchmark_id = "gpqamain"
    provenance = f"HF dataset {REPO} (gated): {TEST_FILE} (test), {DEV_FILE} minus main (dev)"
    files = (TEST, EXTENDED)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {f.role: hf_file(fetcher, REPO, f) for f in self.files}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        test = [_row_sample(row) for row in rows["test"]]
        main_ids = {s.id for s in test}
        dev = [s for s in map(_row_sample, rows["extended"]) if s.id not in main_ids]
        return {"test": test, "dev": dev}
