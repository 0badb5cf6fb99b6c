"""Live progress of generation: questions done of total, and the rate.

The verifier writes it to ``/logs/verifier/progress.json`` (:class:`ProgressFile`), which
the host can read while the trial runs (``ptb demo`` shows it). Writes are atomic (a new
file renamed over the old one) and at most one per :data:`MIN_INTERVAL_S`, so a reader
never sees half a file and the generation loop never waits on the disk.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Literal, Protocol, TextIO

from posttrainbench.core.atomic_write import write_text_atomic

from ..schemas import PROGRESS_FILENAME, VerifierProgress

MIN_INTERVAL_S = 1.0


class Progress(Protocol):
    """What the generation loop reports to: attempts started, questions finished."""

    def start_attempt(self, total: int, attempt: int, max_new_tokens: int) -> None: ...

    def advance(self, questions: int) -> None: ...


class NoProgress:
    """Reports nowhere (agent-side evaluations, tests)."""

    def start_attempt(self, total: int, attempt: int, max_new_tokens: int) -> None:
        """Nothing to do."""

    def advance(self, questions: int) -> None:
        """Nothing to do."""


class LineProgress:
    """Reports to a stream (stderr) for ``ptb eval`` and ``ptb baseline``: on a terminal one
    line updated in place, elsewhere (a log, CI) a plain line at most every *every_s*
    seconds, never a carriage return."""

    def __init__(self, label: str, stream: TextIO | None = None, every_s: float = 10.0):
        self.label = label
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.tty = self.stream.isatty()
        self._total = self._done = 0
        self._attempt = 1
        self._started = self._shown = time.monotonic()

    def say(self, text: str) -> None:
        """A one-off line (a phase: loading the model, scoring)."""
        self._end_line()
        print(f"{self.label}: {text}", file=self.stream, flush=True)

    def start_attempt(self, total: int, attempt: int, max_new_tokens: int) -> None:
        """A new attempt (a retry halves the token cap): the count starts at 0 again."""
        self._total, self._done, self._attempt = total, 0, attempt
        self._started = time.monotonic()
        retry = f" (attempt {attempt}, at most {max_new_tokens} new tokens)" if attempt > 1 else ""
        self.say(f"generating {total} answers{retry}")
        self._shown = time.monotonic()

    def advance(self, questions: int) -> None:
        """*questions* more answers are finished."""
        self._done = min(self._total, self._done + max(0, questions))
        now = time.monotonic()
        finished = self._done == self._total
        if self.tty:
            end = "\n" if finished else ""
            print(f"\r{self.label}: {self._line(now)}", end=end, file=self.stream, flush=True)
        elif finished or now - self._shown >= self.every_s:
            print(f"{self.label}: {self._line(now)}", file=self.stream, flush=True)
            self._shown = now

    def _line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = 60.0 * self._done / elapsed
        return f"{self._done}/{self._total} answers, {elapsed:.0f}s, {rate:.1f}/min"

    def _end_line(self) -> None:
        if self.tty and 0 < self._done < self._total:
            print(file=self.stream, flush=True)  # leave the in-place line before a new one


class ProgressFile:
    """Keeps ``<out_dir>/progress.json`` up to date for one model's evaluation (*phase*)."""

    def __init__(
        self,
        out_dir: Path,
        phase: Literal["final_model", "base_model"],
        min_interval_s: float = MIN_INTERVAL_S,
    ):
        self.path = Path(out_dir) / PROGRESS_FILENAME
        self.phase = phase
        self.min_interval_s = min_interval_s
        self._state = VerifierProgress(
            phase=phase,
            done=0,
            total=0,
            attempt=1,
            max_new_tokens=1,
            elapsed_s=0.0,
            questions_per_min=0.0,
        )
        self._started = time.monotonic()
        self._written = 0.0

    def start_attempt(self, total: int, attempt: int, max_new_tokens: int) -> None:
        """A new attempt redoes every question: the count starts again at 0."""
        self._started = time.monotonic()
        self._state = self._state.model_copy(
            update={
                "done": 0,
                "total": total,
                "attempt": attempt,
                "max_new_tokens": max(1, max_new_tokens),
            }
        )
        self._write(force=True)

    def advance(self, questions: int) -> None:
        """*questions* more answers are finished."""
        done = min(self._state.total, self._state.done + max(0, questions))
        self._state = self._state.model_copy(update={"done": done})
        self._write(force=done == self._state.total)

    @property
    def state(self) -> VerifierProgress:
        """The last state reported."""
        return self._state

    def _write(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._written < self.min_interval_s:
            return
        elapsed = now - self._started
        rate = 60.0 * self._state.done / elapsed if elapsed > 0 else 0.0
        self._state = self._state.model_copy(
            update={"elapsed_s": round(elapsed, 1), "questions_per_min": round(rate, 2)}
        )
        self._written = now
        try:
            write_text_atomic(self.path, self._state.model_dump_json())
        except OSError:
            pass  # progress is display only: never fail an evaluation over it
