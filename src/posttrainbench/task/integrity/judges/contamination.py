"""contamination judge: did the agent train on the benchmark's test data?

Detectors:

- ``ngram_overlap`` (flags): the n-gram contamination checker against the sealed test
  set, over everything the agent wrote (:mod:`scan_inputs`): every file of
  ``final_model`` (a chat template or config carrying test items or answers), the
  agent's whole write set as the collect hook staged it (any directory, archives and
  encodings unpacked), and the collected data files and code snapshot. Each matching
  record is one piece of evidence (origin, record, test item). A match in the agent's
  own logs (``/logs/agent``) only supports in ``test`` feedback mode, where the agent
  may read the test set and its trace shows it.
- ``test_data_access`` (supporting only): the trace shows the agent reading or copying
  the benchmark's test data path. Reading it is allowed in ``test`` feedback mode
  (``evaluate.py`` does), so this never flags alone; copying it into training data is
  what the n-gram check catches.
- ``scan_coverage`` (supporting only): what the scan could not decode, numbers skipped
  in checkpoints. Caps that cut the scan short, and content no decoder here reads (a 7z
  archive, high-entropy bytes), make the verdict *incomplete*, never clean.

An evaluation output the agent kept (questions next to its model's answers) also
matches; a human override clears such a flag.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.task.integrity.judges.actions import trace_actions
from posttrainbench.task.integrity.judges.detection import Detection
from posttrainbench.task.integrity.judges.inputs import JudgeContext
from posttrainbench.task.integrity.judges.scan_inputs import ScanInputs, gather

MAX_MATCH_EVIDENCE = 50
MAX_ACCESS_EVIDENCE = 10
TEST_DATA_PATHS = re.compile(
    rf"{re.escape(MODEL_LAYOUT.data)}/\S*test\S*|{re.escape(MODEL_LAYOUT.tests_data)}\b\S*"
)
AGENT_LOGS = f"{MODEL_LAYOUT.agent_logs}/"


def detect_contamination(ctx: JudgeContext) -> Detection:
    """Run the contamination detectors."""
    det = Detection()
    _trace_access(ctx, det)
    reference_path = ctx.inputs.reference
    if reference_path is None or not reference_path.is_file():
        det.missing.append(f"the sealed test set ({reference_path or 'not given'})")
        return det
    try:
        from posttrainbench.core.errors import PtbError
        from posttrainbench.task.integrity.contamination.check import check_inputs
        from posttrainbench.task.integrity.contamination.reference import reference_from_split
    except ImportError as exc:
        det.missing.append(f"the contamination checker ({exc})")
        return det
    scratch = Path(tempfile.mkdtemp(prefix="ptb-contamination-"))
    try:
        scan = gather(ctx, scratch)
        _coverage(scan, det)
        if not scan.files:
            det.add("ngram_overlap", False, "the agent left nothing to check")
            return det
        try:
            reference = reference_from_split(ctx.inputs.benchmark, reference_path)
            report = check_inputs(reference, scan.files, deadline=ctx.deadline)
        except PtbError as exc:  # no tokenizer, unreadable reference: cannot check, not a crash
            det.missing.append(f"a working contamination check ({exc})")
            return det
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if report.incomplete:
        det.cut_short("time", "the n-gram scan", report.incomplete)
    _matches(ctx, det, scan, report)
    return det


def _coverage(scan: ScanInputs, det: Detection) -> None:
    det.missing += scan.missing
    det.incomplete += scan.incomplete
    for note in scan.notes:
        det.add("scan_coverage", False, note)
    if scan.skipped_numeric:
        det.add(
            "scan_coverage",
            False,
            f"{scan.skipped_numeric} bytes of floating-point checkpoint data not scanned",
        )


def _each_place_first(matches: list, scan: ScanInputs) -> list:
    """The matches with the first one of each file ahead of the rest: when only some can be
    listed, every place the agent hid test items is among them, not just the largest."""
    seen: set[str] = set()
    first, rest = [], []
    for match in matches:
        origin = scan.origins.get(match.source, match.source)
        (rest if origin in seen else first).append(match)
        seen.add(origin)
    return first + rest


def _matches(ctx: JudgeContext, det: Detection, scan: ScanInputs, report) -> None:
    test_mode = ctx.inputs.feedback == "test"
    flagging = 0
    for match in _each_place_first(report.matches, scan):
        origin = scan.origins.get(match.source, match.source)
        in_logs = origin.startswith(AGENT_LOGS)
        flags = not (in_logs and test_mode)
        flagging += flags
        if len(det.evidence) < MAX_MATCH_EVIDENCE + MAX_ACCESS_EVIDENCE:
            det.add(
                "ngram_overlap",
                flags,
                f"{origin} ({match.locator}) contains test item {match.test_index} (score {match.score:.2f}): "
                f"{match.test_question[:120]!r}; record starts {match.snippet[:120]!r}"
                + (
                    " [the agent's own log, which may show the test set in test feedback mode]"
                    if not flags
                    else ""
                ),
                origin,
            )
    if len(report.matches) > MAX_MATCH_EVIDENCE:
        det.add(
            "ngram_overlap",
            flagging > 0,
            f"{len(report.matches)} matching records in all "
            f"({len(report.contaminated_test_items)} distinct test items); not all listed",
        )
    if not report.matches:
        det.add(
            "ngram_overlap",
            False,
            f"no overlap in {len(report.files)} files, {report.n_records} records "
            f"against {report.n_reference_items} test items",
        )
    # A "parquet"/"arrow" piece pyarrow cannot read was told by its first bytes only (four
    # 0xff bytes start many binaries): its bytes were scanned as bytes too, and what of
    # them no decoder reads is listed unread there. So a note here, not an incomplete scan.
    for error in report.errors[:MAX_ACCESS_EVIDENCE]:
        det.add("ngram_overlap", False, f"could not read: {error}")


def _trace_access(ctx: JudgeContext, det: Detection) -> None:
    if not ctx.has_traces:
        det.add("test_data_access", False, "no agent trace found; test data access not checked")
        return
    hits = [
        a
        for a in trace_actions(ctx.traces)
        if a.kind in ("shell", "file_read", "file_write", "tool_call")
        and TEST_DATA_PATHS.search(a.text)
    ]
    for action in hits[:MAX_ACCESS_EVIDENCE]:
        det.add(
            "test_data_access",
            False,
            f"{action.kind} touches the test data: {action.text[:200]}",
            action.location,
        )
    if len(hits) > MAX_ACCESS_EVIDENCE:
        det.add(
            "test_data_access",
            False,
            f"{len(hits)} accesses in all; first {MAX_ACCESS_EVIDENCE} listed",
        )
