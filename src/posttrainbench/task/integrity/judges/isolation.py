"""Run callables side by side, each in a forked child process with a wall-clock cap.

Why processes and not threads: a judge stuck in a regex, a decompressor or a C
extension cannot be interrupted from another thread; a process can be killed. Each
child leads a process group of its own, so the cap kills whatever it started too (the
contamination checker's worker pool). A child sends its result back as pydantic JSON
over a pipe; the parent never trusts more than that.
"""

from __future__ import annotations

import ctypes
import os
import selectors
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

Model = TypeVar("Model", bound=BaseModel)
_KILL_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildFailure:
    """A child that gave no result: it ran past its cap, or died or raised."""

    timed_out: bool
    error: str


@dataclass
class _Child:
    name: str
    pid: int
    fd: int
    deadline: float
    data: bytearray


def _child_main(task: Callable[[], BaseModel], write_fd: int) -> None:
    status = 0
    try:
        payload = b"R" + task().model_dump_json().encode("utf-8")
    except (
        BaseException
    ) as exc:  # everything, even SystemExit: report it, never run the parent's code
        payload = b"E" + "".join(traceback.format_exception_only(type(exc), exc)).strip().encode(
            "utf-8"
        )
        status = 1
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view) :]
    finally:
        os._exit(status)


def _die_with(parent: int) -> None:
    """Be killed when *parent* dies: a runner killed from outside leaves no judge running."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(2)


def _start(name: str, task: Callable[[], BaseModel], cap_s: float) -> _Child:
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            _die_with(parent)
        except BaseException:
            os._exit(2)
        _child_main(task, write_fd)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # also here: the parent may kill before the child ran setpgid
    except OSError:
        pass
    os.set_blocking(read_fd, False)
    return _Child(name, pid, read_fd, time.monotonic() + cap_s, bytearray())


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def _reap(pid: int, wait_s: float = _KILL_GRACE_S) -> int | None:
    """The wait status of *pid* once it ended (waiting up to *wait_s*), else None."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -1
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _drain(child: _Child) -> None:
    while True:
        try:
            chunk = os.read(child.fd, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            return
        child.data += chunk


def _outcome(child: _Child, status: int, model: type[Model]) -> Model | ChildFailure:
    _drain(child)
    data = bytes(child.data)
    if data.startswith(b"R"):
        try:
            return model.model_validate_json(data[1:])
        except ValueError as exc:
            return ChildFailure(False, f"unreadable result from the judge process: {exc}")
    if data.startswith(b"E"):
        return ChildFailure(False, data[1:].decode("utf-8", errors="replace"))
    if status > 0 and os.WIFSIGNALED(status):
        return ChildFailure(False, f"the judge process was killed by signal {os.WTERMSIG(status)}")
    return ChildFailure(False, "the judge process exited without a result")


def run_side_by_side(
    tasks: dict[str, Callable[[], BaseModel]], caps_s: dict[str, float], model: type[Model]
) -> Iterator[tuple[str, Model | ChildFailure]]:
    """Run every task in its own child at once; yield (name, result or failure) as each ends.

    A task still running at its cap (seconds from its start) is killed with its process
    group and yields ``ChildFailure(timed_out=True)``.
    """
    children: list[_Child] = []
    try:
        for name, task in tasks.items():
            children.append(_start(name, task, caps_s[name]))
        while children:
            # Wake on output, or at the latest every 0.2 s to reap and check the caps.
            # Completion is the child's exit, not EOF: a grandchild it left may hold the pipe.
            with selectors.DefaultSelector() as selector:
                for child in children:
                    selector.register(child.fd, selectors.EVENT_READ, child)
                for key, _ in selector.select(timeout=0.2):
                    _drain(key.data)
            for child in list(children):
                status = _reap(child.pid, 0)
                timed_out = status is None and time.monotonic() >= child.deadline
                if status is None and not timed_out:
                    continue
                _kill_group(child.pid)  # the cap, or what a finished child left running
                if timed_out:
                    _reap(child.pid)
                children.remove(child)
                outcome = (
                    ChildFailure(True, "time cap") if timed_out else _outcome(child, status, model)
                )
                os.close(child.fd)
                yield child.name, outcome
    finally:
        for child in children:  # the caller stopped early: leave nothing behind
            _kill_group(child.pid)
            _reap(child.pid)
            os.close(child.fd)
