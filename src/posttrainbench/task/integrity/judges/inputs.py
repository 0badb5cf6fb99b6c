"""What the judges look at: the run's artifacts, the task, and the trusted references.

:class:`JudgeInputs` names the paths (any may be missing: a judge whose input is
missing says so instead of guessing); :class:`JudgeContext` adds the agent's traces,
parsed once and shared by every judge.
"""

from __future__ import annotations

import time
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.verdict import LimitHit
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceEvent

# Files in an agent log directory that are not the agent's trace: the clock stamp (root's).
# The system monitor logs to /logs/artifacts, so any other name there, system_monitor.log
# included, is the agent's and is read as its trace.
NOT_TRACE_NAMES = frozenset({"ptb_start_time"})
TRACE_SUFFIXES = frozenset({".jsonl", ".json", ".txt", ".log", ".ndjson"})
MAX_RAW_LINES = 200_000
# A judge's own work stops at this share of its time cap, so that it still reports what
# it found before the runner's hard stop at the cap.
SOFT_DEADLINE_SHARE = 0.85


class JudgeInputError(ValueError):
    """An input the user gave cannot be used (bad path, unreadable override file)."""


class JudgeInputs(BaseModel):
    """Paths and task facts the judges read. ``None`` means "not available"."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(description="benchmark id, e.g. 'gsm8k'")
    feedback: str = "test"
    base_model_source: str | None = Field(
        default=None, description="'hf:ORG/REPO' or a package name"
    )
    final_model: Path | None = None
    code_snapshot: Path | None = None
    data_files: Path | None = None
    write_set: Path | None = Field(
        default=None,
        description="the staged write set (write_set/ with MANIFEST.json), when the run has one",
    )
    agent_logs: list[Path] = Field(
        default_factory=list, description="directories holding the agent's logs"
    )
    trial_dir: Path | None = Field(default=None, description="a Harbor trial directory (host runs)")
    reference: Path | None = Field(default=None, description="the sealed test split (test.jsonl)")
    base_model: Path | None = None
    verifier_metrics: Path | None = Field(
        default=None, description="the verifier's metrics.json (final and base scores)"
    )
    pristine_workspace: Path | None = Field(
        default=None, description="the task's untouched /app (evaluate.py, templates/, timer.sh)"
    )
    allowed_apis: list[str] = Field(
        default_factory=list, description="provider ids the agent may call (api_providers.json)"
    )

    @property
    def base_model_repo(self) -> str | None:
        """The base model's hub repository ('ORG/REPO'), when it comes from the hub."""
        src = self.base_model_source or ""
        return src[3:] if src.startswith("hf:") else None


class JudgeContext:
    """The inputs plus the agent's traces, parsed lazily and only once.

    It also carries the running judge's byte cap and the caps hit so far, which the
    runner adds to that judge's verdict (:meth:`start_judge` resets them).
    """

    def __init__(self, inputs: JudgeInputs):
        self.inputs = inputs
        self.trace_warnings: list[str] = []
        self.max_bytes: int | None = None
        self.deadline: float | None = None
        self.incomplete: list[LimitHit] = []

    def start_judge(self, max_bytes: int | None, time_s: float | None = None) -> None:
        """Set the caps of the judge about to run (*time_s* from now); forget caps hit by another."""
        self.max_bytes = max_bytes
        self.deadline = None if time_s is None else time.monotonic() + SOFT_DEADLINE_SHARE * time_s
        self.incomplete = []

    @cached_property
    def traces(self) -> list[NormalizedTrace]:
        """Every trace found in the agent's logs (raw text when no parser fits), within the
        byte cap: files past it are not parsed, and that is recorded as incomplete."""
        traces: list[NormalizedTrace] = []
        parse = _trace_parser()
        used = 0
        for i, path in enumerate(self.trace_files):
            size = _size(path)
            if self.max_bytes is not None and used + size > self.max_bytes:
                left = self.trace_files[i:]
                self.incomplete.append(
                    LimitHit(
                        cap="bytes",
                        check="reading the agent's logs",
                        detail=f"{len(left)} of {len(self.trace_files)} log files ({sum(map(_size, left))} bytes) "
                        f"not read: over the {self.max_bytes}-byte cap",
                    )
                )
                break
            used += size
            try:
                traces.append(parse(path) if parse else raw_trace(path))
            except Exception as exc:  # one unreadable log must not hide the others
                self.trace_warnings.append(f"{path}: {exc}")
        return traces

    @cached_property
    def trace_files(self) -> list[Path]:
        """The agent's log files: the trace parsers' finder first, else every log-like file."""
        found: list[Path] = []
        finder = _trace_finder()
        roots = [self.inputs.trial_dir] if self.inputs.trial_dir is not None else []
        roots += self.inputs.agent_logs
        for root in roots:
            if finder is not None:
                try:
                    found = list(finder(root))
                except Exception as exc:
                    self.trace_warnings.append(f"finding traces in {root}: {exc}")
            if found:
                break
        if not found:  # no known format anywhere: every log-like file, read as raw text
            for logs in self.inputs.agent_logs:
                found.extend(log_files(logs))
        return found

    @property
    def has_traces(self) -> bool:
        """Whether any agent log was found."""
        return bool(self.trace_files)


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def log_files(directory: Path) -> list[Path]:
    """Log-like files under *directory*, sorted, without the clock stamp."""
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file() and p.suffix.lower() in TRACE_SUFFIXES and p.name not in NOT_TRACE_NAMES
    )


def raw_trace(path: Path) -> NormalizedTrace:
    """A trace of raw lines, for when no parser is available."""
    events: list[TraceEvent] = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for i, line in enumerate(handle):
            if i >= MAX_RAW_LINES:
                break
            if line.strip():
                events.append(TraceEvent(index=len(events), kind="raw", text=line.rstrip("\n")))
    return NormalizedTrace(
        format="raw",
        source=str(path),
        events=events,
        warnings=["no trace parser available; read as raw lines"],
    )


def _trace_parser():
    try:
        from posttrainbench.task.integrity.traces.load import parse_trace
    except ImportError:
        return None
    return parse_trace


def _trace_finder():
    try:
        from posttrainbench.task.integrity.traces.load import find_trial_traces
    except ImportError:
        return None
    return find_trial_traces
