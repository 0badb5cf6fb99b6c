"""Reading a trace file (or text) into a NormalizedTrace, whatever agent wrote it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import get_args

from posttrainbench.core.errors import PtbError
from posttrainbench.core.nofollow import Refused
from posttrainbench.core.safe_fs import SafeDir, read_named_head
from posttrainbench.task.integrity.traces.builder import SHAPE_ERRORS
from posttrainbench.task.integrity.traces.claude_code import parse_claude_code
from posttrainbench.task.integrity.traces.codex import parse_codex
from posttrainbench.task.integrity.traces.detect import detect_format
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceFormat
from posttrainbench.task.integrity.traces.gemini_cli import parse_gemini_cli
from posttrainbench.task.integrity.traces.harbor_atif import parse_harbor
from posttrainbench.task.integrity.traces.opencode import parse_opencode
from posttrainbench.task.integrity.traces.raw import parse_raw
from posttrainbench.task.integrity.traces.trial_files import (  # noqa: F401  (find_trial_traces re-exported)
    MAX_TRACE_BYTES,
    TRIAL_LOG,
    find_trial_traces,
    plain_agent_log,
    scan_trial_traces,
)

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


def check_format(fmt: str | None) -> TraceFormat | None:
    """*fmt* if it names a trace format (None passes through), else TraceInputError."""
    if fmt is not None and fmt not in PARSERS:
        raise TraceInputError(
            f"unknown trace format {fmt!r}; choose one of {', '.join(TRACE_FORMATS)}"
        )
    return fmt  # type: ignore[return-value]


def read_trace_text(path: Path) -> tuple[str, bool]:
    """The text of a trace file (undecodable bytes replaced) up to MAX_TRACE_BYTES, and whether
    it was cut there; TraceInputError when it is missing or refused.

    Inside a trial directory no link below it is followed (the agent wrote that tree); a
    link, FIFO, device, hard link or sparse file is refused, never read.
    """
    try:
        data, cut = read_named_head(path, MAX_TRACE_BYTES, TRIAL_LOG)
    except FileNotFoundError:
        raise TraceInputError(f"trace file not found: {path}") from None
    except Refused as exc:
        raise TraceInputError(f"refused to read trace file {path}: {exc.reason}") from None
    except IsADirectoryError:
        raise TraceInputError(f"not a trace file: {path}") from None
    except OSError as exc:
        raise TraceInputError(f"cannot read trace file {path}: {exc.strerror or exc}") from exc
    return data.decode("utf-8", errors="replace"), cut


def _parse_head(data: bytes, cut: bool, format: str | None, source: str) -> NormalizedTrace:
    trace = parse_trace_text(data.decode("utf-8", errors="replace"), format, source=source)
    if cut:
        note = f"only the first {MAX_TRACE_BYTES} bytes of the file were read"
        trace = trace.model_copy(update={"warnings": [*trace.warnings, note]})
    return trace


def _parse_file(path: Path, format: str | None) -> NormalizedTrace:
    text, cut = read_trace_text(path)
    return _parse_head(text.encode("utf-8"), cut, format, str(path))


def parse_trial_trace(
    trial_dir: Path, format: str | None = None
) -> tuple[NormalizedTrace, list[str]]:
    """The best trace of a trial directory, parsed, and the candidates refused ('<path>: <why>').

    Found and read below *trial_dir* without following any link, so a file swapped for a
    link after it was found is refused too.
    """
    check_format(format)
    try:
        root = SafeDir.open(trial_dir)
    except OSError as exc:
        raise TraceInputError(f"cannot read {trial_dir}: {exc.strerror or exc}") from None
    with root:
        scan = scan_trial_traces(root)
        # An agent with no trace in a known format (oracle, nop, a custom agent): its plain
        # log, as the run page shows it, read as raw lines.
        best = scan.files[0] if scan.files else plain_agent_log(root)
        if best is None:
            raise TraceInputError(
                f"no agent trace found in {trial_dir} (looked in {trial_dir / 'agent'} and "
                f"{trial_dir})" + (f"; refused {scan.refused[0]}" if scan.refused else "")
            )
        if not scan.files:
            format = format or "raw"
        try:
            data, cut = root.read_head(best, MAX_TRACE_BYTES)
        except Refused as exc:
            raise TraceInputError(
                f"refused to read trace file {trial_dir / best}: {exc.reason}"
            ) from None
        except OSError as exc:
            raise TraceInputError(
                f"cannot read trace file {trial_dir / best}: {exc.strerror or exc}"
            ) from None
    return _parse_head(data, cut, format, str(trial_dir / best)), scan.refused


def parse_trace_text(
    text: str, format: str | None = None, *, source: str | None = None
) -> NormalizedTrace:
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
                log.warning(
                    "trace %s (%s): %d warning(s), first: %s",
                    source or "<text>",
                    fmt,
                    len(trace.warnings),
                    trace.warnings[0],
                )
    return trace.model_copy(update={"source": source})


def parse_trace(path_or_text: Path | str, format: str | None = None) -> NormalizedTrace:
    """Parse a trace file, or trace text, into a NormalizedTrace.

    A `Path` is always a file. A `str` is a file path when it names an existing file or
    looks like one (a single line that is not JSON); otherwise it is the trace text.
    `format` forces a parser ("claude-code", "codex", "gemini-cli", "opencode", "harbor",
    "raw"); by default the format is detected from the content.
    """
    check_format(format)
    if isinstance(path_or_text, Path):
        return _parse_file(path_or_text, format)
    text = path_or_text
    looks_like_text = "\n" in text.strip() or text.lstrip().startswith(("{", "["))
    if not looks_like_text:
        return _parse_file(Path(text), format)
    return parse_trace_text(text, format)
