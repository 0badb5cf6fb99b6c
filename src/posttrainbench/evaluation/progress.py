"""Live progress of generation: questions done of total, and the rate.

The verifier writes it to ``/logs/verifier/progress.json`` (:class:`ProgressFile`), which
the host can read while the trial runs (``ptb demo`` shows it). Writes are atomic (a new
file renamed over the old one) and at most one per :data:`MIN_INTERVAL_S`, so a reader
never sees half a file and the generation loop never waits on the disk.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal, Protocol

from posttrainbench.atomic_write import write_text_atomic

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
