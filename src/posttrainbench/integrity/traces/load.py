"""Reading a trace file (or text) into a NormalizedTrace, whatever agent wrote it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Optional, get_args

from posttrainbench.errors import PtbError
from posttrainbench.integrity.traces.builder import SHAPE_ERRORS
from posttrainbench.integrity.traces.claude_code import parse_claude_code
from posttrainbench.integrity.traces.codex import parse_codex
from posttrainbench.integrity.traces.detect import detect_format
from posttrainbench.integrity.traces.events import NormalizedTrace, TraceFormat
from posttrainbench.integrity.traces.gemini_cli import parse_gemini_cli
from posttrainbench.integrity.traces.harbor_atif import parse_harbor
from posttrainbench.integrity.traces.opencode import parse_opencode
from posttrainbench.integrity.traces.raw import parse_raw
from posttrainbench.integrity.traces.trial_files import find_trial_traces  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

TRACE_FORMATS: tuple[str, ...] = get_args(TraceFormat)

PARSERS: dict[str, Callable[[str], NormalizedTrace]] = {
    "claude-code": parse_claude_code,
    "codex": parse_codex,
    "gemini-cli": parse_gemini_cli,
    "opencode": parse_opencode,
    "harbor": parse_harbor,
    "raw": parse_raw,
}


class TraceInputError(PtbError):
    """A trace file is missing or unreadable, or the requested format does not exist."""


def check_format(fmt: Optional[str]) -> Optional[TraceFormat]:
    """*fmt* if it names a trace format (None passes through), else TraceInputError."""
    if fmt is not None and fmt not in PARSERS:
        raise TraceInputError(f"unknown trace format {fmt!r}; choose one of {', '.join(TRACE_FORMATS)}")
    return fmt  # type: ignore[return-value]


def read_trace_text(path: Path) -> str:
    """The text of a trace file (undecodable bytes replaced), or TraceInputError."""
    if not path.exists():
        raise TraceInputError(f"trace file not found: {path}")
    if not path.is_file():
        raise TraceInputError(f"not a trace file: {path}")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise TraceInputError(f"cannot read trace file {path}: {exc.strerror or exc}") from exc


def parse_trace_text(text: str, format: Optional[str] = None, *, source: Optional[str] = None) -> NormalizedTrace:
    """Parse trace *text*: in *format* if given, else in the detected one, else as raw lines.

    Never raises on bad content: a document that its parser cannot read falls back to raw
    with a warning, and bad lines inside a known format become raw events.
    """
    fmt = check_format(format) or detect_format(text)
    if fmt is None:
        trace = parse_raw(text)
        log.warning("trace %s: unknown format, kept as raw text", source or "<text>")
    else:
        try:
            trace = PARSERS[fmt](text)
        except SHAPE_ERRORS as exc:
            # Only the whole-document format (ATIF) can fail as a whole; keep the text anyway.
            trace = parse_raw(text, reason=f"cannot parse as {fmt} ({type(exc).__name__}: {exc})")
            log.warning("trace %s: cannot parse as %s, kept as raw text", source or "<text>", fmt)
        else:
            if trace.warnings:
                log.warning("trace %s (%s): %d warning(s), first: %s", source or "<text>", fmt,
                            len(trace.warnings), trace.warnings[0])
    return trace.model_copy(update={"source": source})


def parse_trace(path_or_text: Path | str, format: Optional[str] = None) -> NormalizedTrace:
    """Parse a trace file, or trace text, into a NormalizedTrace.

    A `Path` is always a file. A `str` is a file path when it names an existing file or
    looks like one (a single line that is not JSON); otherwise it is the trace text.
    `format` forces a parser ("claude-code", "codex", "gemini-cli", "opencode", "harbor",
    "raw"); by default the format is detected from the content.
    """
    check_format(format)
    if isinstance(path_or_text, Path):
        return parse_trace_text(read_trace_text(path_or_text), format, source=str(path_or_text))
    text = path_or_text
    looks_like_text = "\n" in text.strip() or text.lstrip().startswith(("{", "["))
    if not looks_like_text:
        path = Path(text)
        return parse_trace_text(read_trace_text(path), format, source=str(path))
    return parse_trace_text(text, format)
