"""The `contamination check` command, shared by `ptb` and `python -m` (in sandboxes)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from posttrainbench.core.errors import PtbError
from posttrainbench.task.integrity.contamination.report import CheckSettings, ContaminationReport

# In a task, the agent's checker defaults to the reference shipped with it.
DEFAULT_REFERENCE_ENV = "PTB_CONTAMINATION_REFERENCE"
EXIT_CLEAN, EXIT_CONTAMINATED = 0, 1


def run_check(
    reference: Path,
    inputs: list[Path],
    workers: int | None = None,
    settings: CheckSettings | None = None,
) -> ContaminationReport:
    """Load the reference and check the inputs (user errors raise PtbError)."""
    from posttrainbench.task.integrity.contamination.check import check_inputs
    from posttrainbench.task.integrity.contamination.reference import load_reference

    if workers is not None and workers < 1:
        raise PtbError("--workers must be at least 1")
    items = load_reference(reference)
    return check_inputs(
        items,
        inputs,
        settings=settings,
        workers=workers,
        reference_label=str(reference),
        use_cache=True,
    )


def render_report(report: ContaminationReport, max_matches: int = 50) -> str:
    """A short human-readable summary of a report."""
    mb = report.bytes_scanned / 1e6
    lines = [
        f"scanned {len(report.files)} file(s), {report.n_records} records, {mb:.1f} MB in "
        f"{report.seconds:.1f} s against {report.n_reference_items} test items"
    ]
    for err in report.errors:
        lines.append(f"unreadable: {err}")
    if not report.contaminated:
        lines.append(
            f"clean: no record reaches the overlap threshold ({report.settings.threshold:g})"
        )
        return "\n".join(lines)
    lines.append(
        f"CONTAMINATED: {len(report.matches)} record(s) match "
        f"{len(report.contaminated_test_items)} test item(s)"
    )
    for m in report.matches[:max_matches]:
        lines.append(
            f"  {m.source}:{m.locator}  test item {m.test_index}  score {m.score:.2f}  "
            f"(question {m.question_overlap:.2f})  {m.test_question[:70]!r}"
        )
    if len(report.matches) > max_matches:
        lines.append(f"  ... and {len(report.matches) - max_matches} more (use --json)")
    return "\n".join(lines)


def resolve_reference(reference: str | None) -> Path:
    """The --reference path, else the task's default, else a clear error."""
    chosen = reference or os.environ.get(DEFAULT_REFERENCE_ENV)
    if not chosen:
        raise PtbError(
            "--reference TEST.json is required (a JSON array of {question, answer} objects)"
        )
    return Path(chosen)


def main(argv: list[str] | None = None) -> int:
    """`python -m posttrainbench.task.integrity.contamination --reference R --input F...`."""
    parser = argparse.ArgumentParser(
        prog="check_contamination",
        description="Find training records that overlap a benchmark's test items (cl100k n-grams). "
        "Exit status: 0 clean, 1 contaminated, 2 bad input.",
    )
    parser.add_argument("--reference", help="TEST.json: a JSON array of {question, answer} objects")
    parser.add_argument("--input", nargs="+", required=True, help="files or directories to check")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument(
        "--workers", type=int, default=None, help="processes (default: one per CPU)"
    )
    args = parser.parse_args(argv)
    try:
        report = run_check(
            resolve_reference(args.reference), [Path(p) for p in args.input], args.workers
        )
    except PtbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.model_dump_json(indent=2) if args.json else render_report(report))
    return EXIT_CONTAMINATED if report.contaminated else EXIT_CLEAN
