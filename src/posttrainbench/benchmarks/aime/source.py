"""AIME 2025 (test) and AIME 2023-2024 (dev) from public Hugging Face mirrors.

Test: ``math-ai/aime25`` ``test.jsonl`` (30 problems; fields ``problem``, ``answer``,
``id``), pinned to a revision. Dev: the 2023 and 2024 problems of
``di-zhang-fdu/AIME_1983_2024`` (a CSV with ``ID, Year, Problem Number, Question,
Answer, Part``); earlier exams, so disjoint from the test set. Both are plain text
formats (no parquet reader is needed).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ..answers import parse_integer
from ..base import Sample
from ..fetch import Fetcher
from ..source import DataSource

TEST_REPO = "math-ai/aime25"
TEST_FILE = "test.jsonl"
TEST_REVISION = "563bb8404243c5f09de6ec262f2db674fe5bce9b"
DEV_REPO = "di-zhang-fdu/AIME_1983_2024"
DEV_FILE = "AIME_Dataset_1983_2024.csv"
DEV_REVISION = "main"
DEV_YEARS = (2023, 2024)


def _records(body: bytes) -> list[dict[str, Any]]:
    """Rows of a JSONL file, or of a JSON list (mirrors use both)."""
    text = body.decode("utf-8").strip()
    if text.startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _field(row: dict[str, Any], *names: str) -> Any:
    for name in names:
        if row.get(name) not in (None, ""):
            return row[name]
    raise ValueError(f"AIME row without any of {names}: keys {sorted(row)}")


def _answer(value: Any, where: str) -> int:
    answer = parse_integer(str(value))
    if answer is None or not 0 <= answer <= 999:
        raise ValueError(f"{where}: AIME answer is not an integer in 0..999: {value!r}")
    return answer


def parse_test(body: bytes) -> list[Sample]:
    """The AIME 2025 problems in file order; ids ``aime2025_<source id or index>``."""
    samples = []
    for i, row in enumerate(_records(body)):
        rid = row.get("id", i)
        samples.append(Sample(id=f"aime2025_{rid}", category="aime2025", data={
            "problem": str(_field(row, "problem", "question", "Problem")).strip(),
            "answer": _answer(_field(row, "answer", "Answer"), f"aime2025 row {i}")}))
    return samples


def parse_dev(body: bytes, years: tuple[int, ...] = DEV_YEARS) -> list[Sample]:
    """The problems of *years* from the 1983-2024 CSV, in file order."""
    samples = []
    for row in csv.DictReader(io.StringIO(body.decode("utf-8-sig"))):
        try:
            year = int(row["Year"])
        except (KeyError, ValueError):
            continue
        if year not in years:
            continue
        rid = row.get("ID") or f"{year}-{row.get('Part', '')}-{row.get('Problem Number', '')}"
        samples.append(Sample(id=f"aime_{rid}", category=f"aime{year}", data={
            "problem": row["Question"].strip(), "answer": _answer(row["Answer"], f"AIME {rid}")}))
    return samples


class Aime2025Source(DataSource):
    benchmark_id = "aime2025"
    provenance = (f"HF dataset {TEST_REPO}@{TEST_REVISION}/{TEST_FILE} (test); "
                  f"{DEV_REPO}@{DEV_REVISION}/{DEV_FILE} years {DEV_YEARS} (dev)")

    def fetch(self, fetcher: Fetcher) -> dict[str, list[Sample]]:
        test = parse_test(fetcher.hf_dataset_file(TEST_REPO, TEST_FILE, TEST_REVISION))
        dev = parse_dev(fetcher.hf_dataset_file(DEV_REPO, DEV_FILE, DEV_REVISION))
        return {"test": test, "dev": dev}
