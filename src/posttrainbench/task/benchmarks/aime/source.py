"""AIME 2025 (test) and AIME 2023-2024 (dev) from public Hugging Face mirrors.

Test: ``math-ai/aime25`` ``test.jsonl`` (30 problems; fields ``problem``, ``answer``,
``id``), pinned to a revision. Dev: the 2023 and 2024 problems of
``di-zhang-fdu/AIME_1983_2024`` (a CSV with ``ID, Year, Problem Number, Question,
Answer, Part``); earlier exams, so disjoint from the test set. Both are plain text.
"""

from __future__ import annotations

from typing import Any

from ..answers import parse_integer
from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row, check_columns, read_rows
from ..source import DataSource, RawFile, SourceFile, hf_file

TEST_REPO = "math-ai/aime25"
TEST_FILE = "test.jsonl"
TEST_REVISION = "563bb8404243c5f09de6ec262f2db674fe5bce9b"
DEV_REPO = "di-zhang-fdu/AIME_1983_2024"
DEV_FILE = "AIME_Dataset_1983_2024.csv"
DEV_REVISION = "main"
DEV_YEARS = (2023, 2024)
TEST = SourceFile("test", TEST_FILE, ("problem|question|Problem", "answer|Answer"))
DEV = SourceFile("dev", DEV_FILE, ("Year", "Question", "Answer"))


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
    """The AIME 2025 problems of one file's bytes (JSON Lines or a JSON list), checked as prepare does."""
    rows = read_rows(TEST_FILE, body)
    check_columns(rows, TEST.columns, TEST_FILE)
    return problems_2025(rows)


def problems_2025(rows: list[Row]) -> list[Sample]:
    """The AIME 2025 problems in file order; ids ``aime2025_<source id or index>``.

    The problem text is kept exactly as in the file, since inspect_evals' aime2025
    ``record_to_sample`` (inspect-evals 0.3.103) sends ``record["problem"]`` unchanged.
    """
    samples = []
    for i, row in enumerate(rows):
        rid = row.get("id", i)
        samples.append(
            Sample(
                id=f"aime2025_{rid}",
                category="aime2025",
                data={
                    "problem": str(_field(row, "problem", "question", "Problem")),
                    "answer": _answer(_field(row, "answer", "Answer"), f"aime2025 row {i}"),
                },
            )
        )
    return samples


def problems_of_years(rows: list[Row], years: tuple[int, ...] = DEV_YEARS) -> list[Sample]:
    """The problems of *years* from the 1983-2024 CSV's rows, in file order."""
    samples = []
    for row in rows:
        try:
            year = int(row["Year"])
        except (KeyError, TypeError, ValueError):
            continue
        if year not in years:
            continue
        rid = row.get("ID") or f"{year}-{row.get('Part', '')}-{row.get('Problem Number', '')}"
        samples.append(
            Sample(
                id=f"aime_{rid}",
                category=f"aime{year}",
                data={
                    "problem": row["Question"].strip(),
                    "answer": _answer(row["Answer"], f"AIME {rid}"),
                },
            )
        )
    return samples


class Aime2025Source(DataSource):
    benchmark_id = "aime2025"
    provenance = (
        f"HF dataset {TEST_REPO}@{TEST_REVISION}/{TEST_FILE} (test); "
        f"{DEV_REPO}@{DEV_REVISION}/{DEV_FILE} years {DEV_YEARS} (dev)"
    )
    files = (TEST, DEV)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {
            "test": hf_file(fetcher, TEST_REPO, TEST, TEST_REVISION),
            "dev": hf_file(fetcher, DEV_REPO, DEV, DEV_REVISION),
        }

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        return {"test": problems_2025(rows["test"]), "dev": problems_of_years(rows["dev"])}
