"""Run what final_model controls in a child process that the verifier kills at its deadline.

Loading a model, tokenizing and generating run code paths whose inputs the agent chose
(a tokenizer, a config, weights). A hang there can sit in native code where no Python
signal reaches it, and a crash takes the process with it. So the verifier runs that
work in a forked child in its own session; the parent, which never touches the model,
waits until :func:`kill_time`, then kills the child's whole process group (its CPU
workers included). A child killed or dead without an answer is the model's failure:
the verifier still writes reward 0 and says why in ``metrics.json``, before the task's
verifier timeout, so the trial is scored, not errored (and never re-run).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from typing import Any

# The child is killed this long before the verifier's timeout: time to write the
# results. Below time_budget.RESERVE_S, so an honest model's last attempt has ended.
KILL_RESERVE_S = 15.0
# test.sh's outer `timeout` for the whole verify process (it catches the parent itself).
OUTER_RESERVE_S = 8
POLL_S = 0.5
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ModelFailure(RuntimeError):
    """The model's part of the evaluation hung past the deadline or died."""


def kill_time(timeout_s: float, started_at: float) -> float:
    """When the child is killed: the verifier's timeout less :data:`KILL_RESERVE_S`."""
    return started_at + timeout_s - KILL_RESERVE_S


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the verifier dies (test.sh's outer timeout
    reaches the verifier only, not this session)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _child(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    os.setsid()  # its own process group: one kill reaches every process it starts
    _die_with_parent()
    try:
        result: tuple[str, Any] = ("ok", fn(*args, **kwargs))
    except BaseException as exc:  # the caller's fn reports its own errors; this is a bug
        result = ("raised", f"{type(exc).__name__}: {exc}")
    conn.send(result)
    conn.close()


def call(
    fn: Callable[..., Any], *args: Any, kill_at: float | None = None, what: str, **kwargs: Any
) -> Any:
    """``fn(*args, **kwargs)`` in a forked child; its return value (picklable).

    Raises :class:`ModelFailure` when the child is still running at *kill_at* (epoch
    seconds; None: no limit) or ends without an answer. *what* names the work in the
    reason ("the final model's evaluation").
    """
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=False)
    child.start()
    send.close()
    try:
        while True:
            wait = POLL_S if kill_at is None else max(0.0, min(POLL_S, kill_at - time.time()))
            if receive.poll(wait):
                status, value = receive.recv()
                break
            if not child.is_alive() and not receive.poll(0):
                child.join()
                raise ModelFailure(
                    f"{what} crashed: the process ended with {_exit(child.exitcode)} "
                    "before giving a result"
                )
            if kill_at is not None and time.time() >= kill_at:
                raise ModelFailure(
                    f"{what} did not finish by the verifier's deadline: stopped (a hang in "
                    "loading, tokenizing or generating with this model)"
                )
    except EOFError:
        child.join()
        raise ModelFailure(f"{what} crashed: {_exit(child.exitcode)}") from None
    finally:
        _kill_group(child)
        receive.close()
    if status != "ok":
        raise ModelFailure(f"{what} failed: {value}")
    return value


def _kill_group(child: Any) -> None:
    if child.pid is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    child.join(timeout=10)


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit status {code}"
