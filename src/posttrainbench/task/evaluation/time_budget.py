"""Time limits of the verifier's generation attempts: the one place they are computed.

A fixed per-attempt limit fails a slow machine: on a busy laptop the same answers take
several times longer, the limit cuts every attempt and the trial gets no score. So the
limits here scale with what is measured instead:

- **Deadline**: the task's verifier timeout, counted from when ``test.sh`` started, less
  :data:`RESERVE_S` for writing the results. No attempt ever runs past it.
- **Work** of an attempt: questions x max new tokens, an upper bound on the tokens it
  generates (a greedy answer may stop earlier, never later).
- **Throughput**: work done per second, measured on the attempt's first batch.
- **First batch**: nothing is measured yet, so it may use :data:`FIRST_BATCH_SHARE` of
  the time left (a hang there still leaves time for a retry).
- **The rest**: :data:`SAFETY` x the time the measured throughput predicts, plus
  :data:`GRACE_S`, within the deadline. A machine that is slow from the start is measured
  as slow and given the time it needs; only an attempt far slower than its own first
  batch (a hang, a runaway) is cut and retried with fewer tokens.
- **The last attempt** (no retry left after it) gets all the time left: stopping it
  early could only turn a slow score into no score.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

RESERVE_S = 30.0  # writing metrics.json and reward.json after the last attempt
FIRST_BATCH_SHARE = 0.5
SAFETY = 4.0  # the rest may run this many times slower than its first batch predicts
GRACE_S = 60.0  # start-up and tail effects that do not scale with the work
MIN_LIMIT_S = (
    1.0  # a limit is never below this, even past the deadline (then the attempt fails fast)
)


@dataclass(frozen=True)
class Work:
    """What one generation call has to do: questions x max new tokens."""

    questions: int
    max_new_tokens: int

    @property
    def units(self) -> int:
        """Question-tokens: the most tokens the call may generate."""
        return max(0, self.questions) * max(1, self.max_new_tokens)


@dataclass(frozen=True)
class Throughput:
    """Question-tokens per second, as measured on a finished batch."""

    units_per_s: float

    @classmethod
    def measure(cls, work: Work, seconds: float) -> Throughput:
        """The throughput of *work* done in *seconds* (a zero duration counts as 1 ms)."""
        return cls(work.units / max(seconds, 1e-3))

    def predict_s(self, work: Work) -> float:
        """Seconds *work* takes at this throughput."""
        return work.units / self.units_per_s if self.units_per_s > 0 else float("inf")


@dataclass(frozen=True)
class Deadline:
    """The wall-clock time (``time.time()``) by which all generation must have ended."""

    at: float

    @classmethod
    def for_verifier(cls, timeout_s: float, started_at: float) -> Deadline:
        """The verifier's deadline: its timeout from *started_at*, less :data:`RESERVE_S`."""
        return cls(started_at + timeout_s - RESERVE_S)

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """A deadline *seconds* from now (standalone evaluations, tests)."""
        return cls(time.time() + seconds)

    def left_s(self, now: float | None = None) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.at - (time.time() if now is None else now)


def first_batch_limit(
    deadline: Deadline, last_attempt: bool = False, now: float | None = None
) -> float:
    """The time limit of an attempt's first batch, before any throughput is known."""
    left = deadline.left_s(now)
    return max(MIN_LIMIT_S, left if last_attempt else left * FIRST_BATCH_SHARE)


def rest_limit(
    work: Work,
    throughput: Throughput,
    deadline: Deadline,
    last_attempt: bool = False,
    now: float | None = None,
) -> float:
    """The time limit of the rest of an attempt: scaled from the measured throughput, within the deadline."""
    left = max(MIN_LIMIT_S, deadline.left_s(now))
    if last_attempt:
        return left
    return max(MIN_LIMIT_S, min(left, SAFETY * throughput.predict_s(work) + GRACE_S))


def first_batch_size(questions: int, batch_size: int) -> int:
    """How many questions the throughput is measured on: one batch of the backend, at most all."""
    return max(1, min(questions, batch_size))
