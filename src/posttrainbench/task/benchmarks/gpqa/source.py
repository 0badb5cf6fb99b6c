"""GPQA from the gated Hugging Face dataset ``Idavidrein/gpqa`` (CSV files, stdlib ``csv``).

Test: ``gpqa_main.csv`` (448 questions). Dev: the ``gpqa_extended.csv`` questions whose
``Record ID`` is not in main (extended is a superset of main). Choices are shuffled
here, once, with an RNG seeded by a fixed seed and the record id, so the order of a
question does not depend on file order, ``--limit`` or the machine.

Fields as PostTrainBench's ``record_to_sample`` (``src/eval/tasks/gpqamain/evaluate.py``)
reads them: ``input=record["Question"]`` and ``choices=[str(record["Correct Answer"]),
str(record["Incorrect Answer 1..3"])]`` with no cleanup, target ``"A"`` (the correct
answer) before the shuffle. The ``datasets`` CSV reader (pandas ``read_csv``) turns a
cell holding one of pandas' default NA strings into None, which ``str()`` makes
``"None"``; :func:`hf_text` does the same. The sample id is ``gpqa_<Record ID>``.
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


# pandas 2.x ``_libs.parsers.STR_NA_VALUES``: read_csv's default NA strings (keep_default_na).
PANDAS_NA = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND"}
    | {"1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)


def hf_text(value: str | None) -> str:
    """``str(record[column])`` of a choice cell as Hugging Face ``datasets`` loads it."""
    return "None" if value is None or value in PANDAS_NA else value


def shuffled_choices(record_id: str, correct: str, incorrect: list[str]) -> tuple[list[str], str]:
    """(four choices in a seeded order, the correct letter); deterministic per record id.

    The permutation is inspect-ai 0.3.150's ``MemoryDataset.shuffle_choices``
    (dataset/_dataset.py: shuffle the positions, take the choices in that order, the
    target becomes the new letter of position 0) with ``random.Random(seed)`` for a
    seed of this question's own instead of one ``Random(None)`` for the whole dataset.
    """
    options = [correct, *incorrect]
    order = list(range(len(options)))
    # A str seed is hashed with sha512 by ``random``: stable across processes and versions.
    random.Random(f"{SHUFFLE_SEED}:{record_id}").shuffle(order)
    return [options[i] for i in order], LETTERS[order.index(0)]


def _row_sample(row: Row) -> Sample:
    rid = row["Record ID"].strip()
    incorrect = [hf_text(row[f"Incorrect Answer {k}"]) for k in (1, 2, 3)]
    choices, letter = shuffled_choices(rid, hf_text(row["Correct Answer"]), incorrect)
    return Sample(
        id=f"gpqa_{rid}",
        category=row.get("High-level domain", "").strip(),
        data={
            "question": row["Question"],
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
