"""A straightforward pure-Python checker: tokenize every record, look up every n-gram.

It defines the expected results (the fast checker must report exactly the same
matches) and is the reference that `bench/contamination` measures speed against.
"""

from __future__ import annotations

import time
from pathlib import Path

from posttrainbench.task.integrity.contamination.check import SNIPPET_CHARS, score_block
from posttrainbench.task.integrity.contamination.index import ReferenceIndex
from posttrainbench.task.integrity.contamination.normalize import normalize_text, record_text
from posttrainbench.task.integrity.contamination.records import (
    expand_inputs,
    input_format,
    line_records,
    row_records,
)
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
from posttrainbench.task.integrity.contamination.report import CheckSettings, ContaminationReport
from posttrainbench.task.integrity.contamination.tokens import cl100k
from posttrainbench.task.integrity.contamination.variants import expand, fold


def naive_check(
    reference: list[ReferenceItem], inputs: list[str | Path], settings: CheckSettings | None = None
) -> ContaminationReport:
    """Check every record of every input, one at a time, without any prefilter."""
    started = time.perf_counter()
    expanded = expand(reference)
    index = ReferenceIndex.build(expanded.items, settings)
    enc = cl100k()
    files = expand_inputs(inputs)
    matches, records, size = [], 0, 0
    for path in files:
        fmt = input_format(path)
        block = (
            line_records(path.read_bytes(), fmt)
            if fmt in ("jsonl", "txt")
            else row_records(path, fmt)
        )
        size += path.stat().st_size
        records += len(block.starts)
        pairs = {}
        for rec in range(len(block.starts)):
            text = record_text(block.record(rec), block.is_json)
            found = index.candidate_items(enc.encode_ordinary(normalize_text(text)))
            if found:
                pairs[rec] = sorted(found)
        matches.extend(score_block(block, pairs, index, str(path)))
    matches = fold(matches, expanded, reference, SNIPPET_CHARS)
    return ContaminationReport(
        contaminated=bool(matches),
        reference="reference",
        n_reference_items=len(reference),
        settings=index.settings,
        files=[str(f) for f in files],
        n_records=records,
        bytes_scanned=size,
        seconds=round(time.perf_counter() - started, 3),
        matches=matches,
        contaminated_test_items=sorted({m.test_index for m in matches}),
    )
