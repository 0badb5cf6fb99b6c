"""The reference: the benchmark's test items as question / answer / passage texts.

`--reference TEST.json` takes PostTrainBench's format, a JSON array of
`{"question", "answer"}` objects (`passage` optional). `reference_from_split` builds
the same items from a prepared split file of one of our benchmarks.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.core.errors import PtbError
from posttrainbench.task.benchmarks import UnknownBenchmarkError, get_benchmark


class ReferenceError(PtbError):
    """The reference file is missing or not in the expected format."""


class ReferenceItem(BaseModel):
    """One test item."""

    model_config = ConfigDict(extra="ignore")

    question: str
    answer: str | None = None
    passage: str | None = None


def load_reference(path: str | Path) -> list[ReferenceItem]:
    """Read TEST.json (a JSON array of {question, answer}) or the same as JSON lines."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReferenceError(f"cannot read reference {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise ReferenceError(
                f"reference {path} is neither a JSON array nor JSON lines"
            ) from exc
    if not isinstance(data, list) or not data:
        raise ReferenceError(
            f"reference {path} must be a non-empty JSON array of {{question, answer}} objects"
        )
    try:
        items = [ReferenceItem.model_validate(_stringify(row)) for row in data]
    except (ValidationError, TypeError, AttributeError) as exc:
        raise ReferenceError(
            f"reference {path}: every item needs a string 'question' ({_first_line(exc)})"
        ) from exc
    return items


def _stringify(row: dict) -> dict:
    # Answers are often numbers (AIME, GSM8K targets); compare them as text.
    return {
        k: (
            str(v) if k in ("answer", "passage") and v is not None and not isinstance(v, str) else v
        )
        for k, v in row.items()
    }


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0]


def reference_from_split(benchmark_id: str, path: str | Path) -> list[ReferenceItem]:
    """Items of a prepared split file (`test.jsonl`) of one of our benchmarks (each
    benchmark maps its records to text: ``Benchmark.contamination_text``)."""
    try:
        benchmark = get_benchmark(benchmark_id)
    except UnknownBenchmarkError:
        raise ReferenceError(
            f"no contamination reference mapping for benchmark {benchmark_id!r}"
        ) from None
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ReferenceError(f"cannot read split {path}: {exc.strerror}") from exc
    items = []
    for line in lines:
        if line.strip():
            try:
                text = benchmark.contamination_text(json.loads(line)["data"])
                items.append(ReferenceItem.model_validate(dataclasses.asdict(text)))
            except (KeyError, TypeError, ValueError, ValidationError) as exc:
                raise ReferenceError(
                    f"{path}: a record lacks the {benchmark_id} fields ({exc!r})"
                ) from exc
    return items


def write_reference(items: list[ReferenceItem], path: str | Path) -> Path:
    """Write items as TEST.json (PostTrainBench's format)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps([i.model_dump(exclude_none=True) for i in items], ensure_ascii=False),
        encoding="utf-8",
    )
    return path
