"""Progress of a long `ptb results export` on stderr, without a thread.

On a terminal one line is rewritten in place (at most ten times a second); when stderr is
a file or a pipe (a log, CI) a plain line is written every `log_every` seconds instead, so
a log grows by a few lines, never by a carriage-return soup. No thread is started, which
keeps the exporting process single-threaded and its worker pool free to fork.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ExportProgress:
    """A callable for `export(progress=...)`: (done, found so far, search finished)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        log_every: float = 10.0,
        clock=time.monotonic,
    ):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = 0.1 if self.tty else log_every
        self.clock = clock
        self.started = clock()
        self.last = self.started
        self.width = 0  # of the line on screen, to blank it when it shrinks or ends

    def __call__(self, done: int, found: int, finished: bool) -> None:
        """Show how far the export is, when the last update is old enough."""
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        total = f"{found}" if finished else f"{found}+ found so far"
        line = f"exporting trials: {done} of {total} ({now - self.started:.0f} s)"
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the terminal line (a log keeps its lines)."""
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
