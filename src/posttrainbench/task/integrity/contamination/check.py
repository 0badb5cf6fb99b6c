"""`check_inputs`: the fast checker (prefilter, then exact n-gram scoring), in parallel."""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from posttrainbench.task.integrity.contamination.index import ReferenceIndex
from posttrainbench.task.integrity.contamination.normalize import normalize_text, record_text
from posttrainbench.task.integrity.contamination.prefilter import Signatures
from posttrainbench.task.integrity.contamination.records import (
    LINE_FORMATS,
    InputError,
    RecordBlock,
    expand_inputs,
    input_format,
    line_records,
    row_records,
    split_points,
)
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
from posttrainbench.task.integrity.contamination.report import (
    CheckSettings,
    ContaminationReport,
    RecordMatch,
)
from posttrainbench.task.integrity.contamination.scoring import DocGrams, overlap
from posttrainbench.task.integrity.contamination.variants import expand, fold

CHUNK_BYTES = 8 * 1024 * 1024
SNIPPET_CHARS = 160

# Set in the parent before worker processes fork, so they share it without pickling.
_STATE: dict = {}


@dataclass
class _Task:
    path: str
    fmt: str
    start: int = 0
    end: int = -1


@dataclass
class _TaskResult:
    records: int = 0
    bytes: int = 0
    matches: list[RecordMatch] = field(default_factory=list)
    newlines: int = 0
    error: str | None = None


def score_block(
    block: RecordBlock, pairs: dict[int, list[int]], index: ReferenceIndex, source: str
) -> list[RecordMatch]:
    """Exact scoring of candidate records against their candidate items."""
    if not pairs:
        return []  # no need to load the tokenizer
    from posttrainbench.task.integrity.contamination.tokens import cl100k

    enc = cl100k()
    matches = []
    for rec in sorted(pairs):
        text = record_text(block.record(rec), block.is_json)
        doc = DocGrams(enc.encode_ordinary(normalize_text(text)))
        for item in sorted(pairs[rec]):
            found = overlap(index.grams[item], doc)
            if found is not None and found.score >= index.settings.threshold:
                matches.append(
                    RecordMatch(
                        source=source,
                        locator=block.locator(rec),
                        test_index=item,
                        test_question=index.items[item].question[:SNIPPET_CHARS],
                        score=round(found.score, 4),
                        question_overlap=round(found.question, 4),
                        answer_overlap=None if found.answer is None else round(found.answer, 4),
                        passage_overlap=None if found.passage is None else round(found.passage, 4),
                        snippet=text[:SNIPPET_CHARS],
                    )
                )
    return matches


def _read_block(task: _Task) -> tuple[RecordBlock, int, int]:
    path = Path(task.path)
    if task.fmt in ("jsonl", "txt"):
        with path.open("rb") as handle:
            handle.seek(task.start)
            data = handle.read(task.end - task.start if task.end >= 0 else -1)
        block = line_records(data, task.fmt, byte_offset=task.start)
        return block, len(data), block.newlines
    return row_records(path, task.fmt), path.stat().st_size, 0


def _run_task(task: _Task) -> _TaskResult:
    index: ReferenceIndex = _STATE["index"]
    signatures: Signatures = _STATE["signatures"]
    try:
        block, size, newlines = _read_block(task)
    except (OSError, InputError) as exc:
        return _TaskResult(error=f"{task.path}: {exc}")
    pairs: dict[int, list[int]] = {}
    for rec, item in signatures.candidates(block.data, block.starts):
        pairs.setdefault(rec, []).append(item)
    matches = score_block(block, pairs, index, task.path)
    return _TaskResult(records=len(block.starts), bytes=size, matches=matches, newlines=newlines)


def _tasks(files: list[Path], chunk_bytes: int) -> list[_Task]:
    tasks = []
    for path in files:
        fmt = input_format(path)
        if path.suffix.lower() in LINE_FORMATS and path.stat().st_size > chunk_bytes:
            tasks.extend(_Task(str(path), fmt, a, b) for a, b in split_points(path, chunk_bytes))
        else:
            tasks.append(_Task(str(path), fmt))
    return tasks


def _renumber_lines(tasks: list[_Task], results: list[_TaskResult]) -> None:
    # Workers number lines from 1 within their chunk; shift by the lines before it.
    offset: dict[str, int] = {}
    for task, result in zip(tasks, results):
        before = offset.get(task.path, 0)
        if task.fmt == "jsonl" and before:
            for m in result.matches:
                m.locator = f"line {int(m.locator.removeprefix('line ')) + before}"
        offset[task.path] = before + result.newlines


def default_workers() -> int:
    """One worker per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _run_all(tasks: list[_Task], workers: int, deadline: float | None) -> list[_TaskResult]:
    """Results of the tasks in order; only those done by *deadline* (time.monotonic())."""
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        # Fork shares the index without pickling it. Python warns when any thread
        # exists (numpy's BLAS pool has an idle one); the workers never touch BLAS.
        results: list[_TaskResult] = []
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*use of fork\\(\\) may lead to deadlocks.*")
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                pending = pool.imap(_run_task, tasks, chunksize=1)
                for _ in tasks:
                    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                    try:
                        results.append(pending.next(timeout=wait))
                    except multiprocessing.TimeoutError:
                        break  # leaving the block terminates the workers
        return results
    results = []
    for task in tasks:
        if deadline is not None and time.monotonic() > deadline:
            break
        results.append(_run_task(task))
    return results


def check_inputs(
    reference: list[ReferenceItem],
    inputs: list[str | Path],
    settings: CheckSettings | None = None,
    workers: int | None = None,
    reference_label: str = "reference",
    chunk_bytes: int = CHUNK_BYTES,
    deadline: float | None = None,
    cache_dir: Path | None = None,
    use_cache: bool = False,
) -> ContaminationReport:
    """Check training-data files (or directories) for n-gram overlap with the reference.

    With a *deadline* (a time.monotonic() value) the check stops there and reports what
    it did not finish in ``incomplete``. With *use_cache* the reference's index comes
    from (and goes to) the on-disk cache in *cache_dir* (default: refcache's).
    """
    started = time.perf_counter()
    files = expand_inputs(inputs)
    # Each item is also matched in the forms a file may hold it in (variants.py).
    expanded = expand(reference)
    if use_cache:
        from posttrainbench.task.integrity.contamination.refcache import load_or_build

        index, signatures = load_or_build(expanded.items, settings, cache_dir)
    else:
        index = ReferenceIndex.build(expanded.items, settings)
        signatures = Signatures.build(index)
    tasks = _tasks(files, chunk_bytes)
    workers = min(workers or default_workers(), max(1, len(tasks)))
    _ = signatures.scan_tables  # built once here, shared by forked workers
    _STATE.update(index=index, signatures=signatures)
    results = _run_all(tasks, workers, deadline)
    unfinished = tasks[len(results) :]
    _renumber_lines(tasks, results)
    matches = fold([m for r in results for m in r.matches], expanded, reference, SNIPPET_CHARS)
    return ContaminationReport(
        contaminated=bool(matches),
        reference=reference_label,
        n_reference_items=len(reference),
        settings=index.settings,
        files=[str(f) for f in files],
        n_records=sum(r.records for r in results),
        bytes_scanned=sum(r.bytes for r in results),
        seconds=round(time.perf_counter() - started, 3),
        matches=matches,
        contaminated_test_items=sorted({m.test_index for m in matches}),
        errors=[r.error for r in results if r.error],
        incomplete=(
            f"the deadline passed with {len(unfinished)} of {len(tasks)} parts of "
            f"{len({t.path for t in unfinished})} files unchecked"
        )
        if unfinished
        else None,
    )
