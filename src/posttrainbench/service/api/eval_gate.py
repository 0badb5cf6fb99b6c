"""Which evaluations may run at the same time, and waiting for all of them to end.

Viewable evaluations run side by side (up to the service's concurrency); an aggregate-only
evaluation holds it alone, so no other candidate runs beside it that could watch it (its
process list, its timing) and repeat what it saw in a viewable answer. Waiting holders that
must be alone go first, so a stream of viewable evaluations cannot starve them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class EvalGate:
    """A gate over evaluations: side by side, or one alone, plus a count of requests in flight."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._side_by_side = 0
        self._alone = False
        self._waiting_alone = 0
        self._in_flight = 0

    @contextmanager
    def in_flight(self) -> Iterator[None]:
        """Count one request from its first check to its last write (see :meth:`drain`)."""
        with self._cond:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    @contextmanager
    def side_by_side(self) -> Iterator[None]:
        """Hold the gate with other side-by-side holders."""
        with self._cond:
            while self._alone or self._waiting_alone:
                self._cond.wait()
            self._side_by_side += 1
        try:
            yield
        finally:
            with self._cond:
                self._side_by_side -= 1
                self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Hold the gate alone."""
        with self._cond:
            self._waiting_alone += 1
            try:
                while self._alone or self._side_by_side:
                    self._cond.wait()
            finally:
                self._waiting_alone -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()

    def drain(self, timeout_s: float) -> bool:
        """Wait until no request is in flight; False when *timeout_s* passed first."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True
