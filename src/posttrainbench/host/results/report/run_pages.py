"""View models for the report's per-run pages: metadata, verdicts and a capped, readable trace.

The template gets plain strings only; Jinja's autoescape makes them safe, so a trace or a
justification that contains markup is shown as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from posttrainbench.core.errors import PtbError
from posttrainbench.core.nofollow import Refused
from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.report.training_curve import TrainingCurve, training_curve
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.results.table import Leaderboard, RunRow
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TokenUsage, TraceEvent
from posttrainbench.task.integrity.traces.load import parse_trace_text
from posttrainbench.task.integrity.traces.render import format_usage, truncate

DEFAULT_MAX_EVENTS = 200
DEFAULT_MAX_CHARS = 2_000
# Why a byte cap too: a long agent run can leave a trace of hundreds of MB; the report
# shows only the first events anyway, so reading (and parsing) more is wasted time.
MAX_TRACE_BYTES = 4_000_000


@dataclass(frozen=True)
class EventView:
    """One trace event as the template shows it."""

    number: int
    kind: str
    label: str
    body: str
    cut: bool


@dataclass
class TraceView:
    """A run's trace, prepared and capped; `error` says why there is none."""

    source: str | None = None
    format: str | None = None
    events: list[EventView] = field(default_factory=list)
    total_events: int = 0
    usage: str | None = None
    warnings: list[str] = field(default_factory=list)
    bytes_cut: bool = False
    error: str | None = None
    log: str | None = None  # an agent without a structured trace: its plain log's head
    curve: TrainingCurve | None = None  # the loss its output shows, by step or epoch

    @property
    def events_cut(self) -> bool:
        """Whether only the first events are shown."""
        return self.total_events > len(self.events)


@dataclass(frozen=True)
class VerdictView:
    """One judge's verdict, with its status spelled out."""

    judge: Judgement

    @property
    def status(self) -> str:
        """flagged, clean or undecided."""
        return {True: "flagged", False: "clean", None: "undecided"}[self.judge.flagged]


@dataclass(frozen=True)
class SampleView:
    """One question of the final evaluation: its verdict and the completion's head."""

    id: str
    score: float
    error_type: str | None
    completion: str

    @property
    def verdict(self) -> str:
        """right, wrong, or the partial score."""
        return "right" if self.score >= 1 else "wrong" if self.score <= 0 else f"{self.score:.2f}"


@dataclass
class SamplesView:
    """The questions the verifier scored (the first MAX_SAMPLES), or why there are none."""

    samples: list[SampleView] = field(default_factory=list)
    total: int = 0
    error: str | None = None


MAX_SAMPLES = 300
SAMPLE_SHOWN_CHARS = 1500


def samples_view(read: ReadHead, record: ResultRecord) -> SamplesView:
    """The run's per-question results (verifier/samples.jsonl as stored); never raises."""
    if record.samples_file is None:
        return SamplesView(error="the verifier kept no per-question results for this run")
    try:
        text, _cut = _read_capped(read, record.samples_file)
    except OSError as exc:
        reason = exc.reason if isinstance(exc, Refused) else exc.strerror or str(exc)
        return SamplesView(error=f"cannot read the per-question results: {reason}")
    shown: list[SampleView] = []
    total = 0
    for line in text.splitlines():
        try:
            row = json.loads(line)
            sample = SampleView(
                id=str(row["id"]),
                score=float(row["score"]),
                error_type=row.get("error_type"),
                completion=truncate(str(row.get("completion", "")), SAMPLE_SHOWN_CHARS),
            )
        except (ValueError, KeyError, TypeError):
            continue  # a line cut at the byte cap, or not ours
        total += 1
        if len(shown) < MAX_SAMPLES:
            shown.append(sample)
    return SamplesView(samples=shown, total=total)


@dataclass
class RunPage:
    """Everything the page of one run shows."""

    record: ResultRecord
    row: RunRow | None
    verdicts: list[VerdictView]
    trace: TraceView
    samples: SamplesView = field(default_factory=SamplesView)

    @property
    def anchor(self) -> str:
        """The id of the run's section (the page's `#fragment`)."""
        return run_anchor(self.record.id)


def run_anchor(run_id: str) -> str:
    """`run-<id>`: the element id, and fragment, of a run's page."""
    return f"run-{run_id}"


def _event_view(event: TraceEvent, max_chars: int) -> EventView:
    """Label and body text of one event, the body cut to *max_chars*."""
    kind = event.kind
    if kind == "message":
        label = (event.role or "message") + (f" · {event.model}" if event.model else "")
        body = event.text or ""
    elif kind == "tool_call":
        label, body = (
            f"tool call · {event.tool}",
            json.dumps(event.tool_input or {}, ensure_ascii=False, indent=1),
        )
    elif kind == "tool_result":
        label, body = "tool result" + (f" · {event.tool}" if event.tool else ""), event.text or ""
    elif kind == "shell":
        label, body = "shell", f"$ {event.command or ''}"
    elif kind in ("file_read", "file_write"):
        label, body = kind.replace("_", " "), event.path or ""
    elif kind == "url":
        label, body = "url", event.url or ""
    elif kind == "usage":
        label, body = "usage", format_usage(event.usage or TokenUsage(), unknown_cost=False)
    else:
        label, body = "raw", event.text or ""
    body = body.rstrip()
    shown = truncate(body, max_chars)
    return EventView(number=event.index + 1, kind=kind, label=label, body=shown, cut=shown != body)


# Reads the first bytes of one of the run's stored files: (bytes, whether there was more).
ReadHead = Callable[[str, int], tuple[bytes, bool]]


def _read_capped(read: ReadHead, relative: str) -> tuple[str, bool]:
    data, cut = read(relative, MAX_TRACE_BYTES)
    return data.decode("utf-8", errors="replace"), cut


def trace_view(
    read: ReadHead,
    record: ResultRecord,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> TraceView:
    """The run's first trace file, parsed and capped; never raises for a missing or odd trace."""
    if not record.trace_files:
        if record.agent_log:
            return _log_view(read, record.agent_log, max_events * max_chars)
        return TraceView(error="this run has no trace file")
    relative = record.trace_files[0]
    try:
        text, bytes_cut = _read_capped(read, relative)
        trace: NormalizedTrace = parse_trace_text(text, source=relative)
    except (OSError, PtbError) as exc:
        reason = (
            exc.reason if isinstance(exc, Refused) else getattr(exc, "strerror", None) or str(exc)
        )
        return TraceView(source=relative, error=f"cannot read trace {relative}: {reason}")
    events = [_event_view(e, max_chars) for e in trace.events[:max_events]]
    return TraceView(
        source=relative,
        format=trace.format,
        events=events,
        total_events=len(trace.events),
        usage=format_usage(trace.usage),
        warnings=trace.warnings[:20],
        bytes_cut=bytes_cut,
        curve=training_curve(text),
    )


def _log_view(read: ReadHead, relative: str, max_chars: int) -> TraceView:
    """An agent's plain log (no structured trace): its head, as one text block."""
    try:
        text, bytes_cut = _read_capped(read, relative)
    except OSError as exc:
        reason = exc.reason if isinstance(exc, Refused) else exc.strerror or str(exc)
        return TraceView(source=relative, error=f"cannot read the agent's log: {reason}")
    return TraceView(
        source=relative,
        format="plain log",
        log=truncate(text, max_chars),
        bytes_cut=bytes_cut or len(text) > max_chars,
        curve=training_curve(text),
    )


def build_run_pages(
    board: Leaderboard,
    records: list[ResultRecord],
    results_dir: Path,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[RunPage]:
    """One page per record, in the leaderboard's run order (records it does not list come last)."""
    rows = {row.id: row for row in board.runs}
    order = {row.id: i for i, row in enumerate(board.runs)}
    ordered = sorted(records, key=lambda r: (order.get(r.id, len(order)), r.id))
    store = ResultsStore(Path(results_dir))
    pages = []
    try:
        for record in ordered:

            def read(
                relative: str, limit: int, record: ResultRecord = record
            ) -> tuple[bytes, bool]:
                return store.read_run_file(record, relative, limit)

            pages.append(
                RunPage(
                    record=record,
                    row=rows.get(record.id),
                    verdicts=[
                        VerdictView(v)
                        for v in sorted(
                            record.verdicts, key=lambda v: (v.flagged is not True, v.judge)
                        )
                    ],
                    trace=trace_view(read, record, max_events=max_events, max_chars=max_chars),
                    samples=samples_view(read, record),
                )
            )
    finally:
        store.close()
    return pages
