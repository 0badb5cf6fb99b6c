"""Test items hidden in the formats of issue 36 item 6, through the contamination judge itself.

Each planted file (``contamination_hidden_cases``) is the only training file of a run; the
judge must flag the run and name the file (``caught``), or list the file among what no
decoder here reads (``unread``), which makes the verdict incomplete: flagged by the limit
rule, never clean. Either way no contaminated run passes as clean.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.task.integrity.judges.contamination import detect_contamination
from posttrainbench.task.integrity.judges.inputs import JudgeContext
from posttrainbench.task.integrity.judges.precedence import decide
from posttrainbench.task.integrity.judges.scan_inputs import gather
from tests.security.contamination_hidden_cases import ITEMS, Case, cases
from tests.unit.test_judges_contamination import checker, judge_context

PLANTED = "blob.dat"


def _context(tmp_path: Path, case: Case) -> JudgeContext:
    reference = tmp_path / "tests" / "test.jsonl"
    reference.parent.mkdir(parents=True)
    reference.write_text(
        "".join(
            json.dumps({"id": str(i), "category": "main", "data": item.model_dump()}) + "\n"
            for i, item in enumerate(ITEMS)
        )
    )
    data = tmp_path / "data_files"
    (data / "data").mkdir(parents=True)
    (data / "data" / PLANTED).write_bytes(case.data)
    return judge_context(tmp_path, reference, data)


@checker
@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_a_hidden_test_item_is_caught_or_listed_as_unread(tmp_path: Path, case: Case) -> None:
    ctx = _context(tmp_path, case)
    det = detect_contamination(ctx)
    hits = [e for e in det.evidence if e.detector == "ngram_overlap" and e.flagged]
    if case.expect == "caught":
        assert det.flagged and any(PLANTED in (e.location or "") for e in hits), det.evidence
    else:
        assert not hits, det.evidence
        notes = gather(ctx, tmp_path / "scratch").notes
        assert any(n.startswith("not decoded") and PLANTED in n for n in notes), notes
        unread = [h for h in det.incomplete if h.cap == "decoder"]
        assert unread and PLANTED in unread[0].detail, det.incomplete
        verdict = decide("contamination", det, None, None)
        assert verdict.flagged is True and verdict.decided_by == "limit", verdict
        assert verdict.justification.startswith("incomplete: decoding the agent's files")
