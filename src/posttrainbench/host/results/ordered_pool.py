"""Map a function over chunks (lists) in worker processes, results in the chunks' order.

Why not `multiprocessing.Pool`: its worker-handler thread also waits on the result pipe,
so while a result sits unread it loops (about 9,000 wake-ups, each reaping every worker,
for one export of 5,000 trials), and three threads share the parent's GIL with the walk.
Here the parent is one thread: it hands each worker one chunk at a time (the next one is
already built while the worker runs) and reads every answer with one `wait`. A worker
that dies is an error, where a `Pool` would wait for it forever.

A worker is only ever sent a chunk once its previous answer has been read, so it is then
waiting to read: neither side can block the other with a full pipe.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

from posttrainbench.core.errors import PtbError

ProcessContext = ForkContext | SpawnContext | ForkServerContext

# A worker still running when the parent is done with it (an error, an early stop): how
# long it gets to exit on its own before it is terminated.
_JOIN_SECONDS = 5.0


class WorkerDied(PtbError):
    """A worker process ended without answering (killed, out of memory, a crash)."""

    exit_code = 1  # not the user's input: the machine's


def _serve(
    func: Callable[[list], Any],
    requests: Connection,
    answers: Connection,
    initializer: Callable[..., None] | None,
    initargs: tuple,
) -> None:
    # Ctrl-C reaches the whole process group: the parent handles it and ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            chunk = requests.recv()
        except EOFError:  # the parent is gone
            return
        if chunk is None:  # the parent is done (no EOF: forked siblings hold the pipe open)
            return
        try:
            reply: tuple[bool, Any] = (True, func(chunk))
        except Exception as exc:  # the parent raises it
            reply = (False, exc)
        try:
            answers.send(reply)
        except (OSError, EOFError):
            return  # the parent stopped listening
        except Exception as exc:  # an answer or exception that does not pickle
            answers.send((False, RuntimeError(f"a worker's answer could not be sent: {exc!r}")))


@dataclass
class _Worker:
    process: BaseProcess
    requests: Connection  # the parent's end: chunks out
    answers: Connection  # the parent's end: results in
    chunk: int | None = None  # the number of the chunk it is working on


def map_chunks(
    func: Callable[[list], Any],
    chunks: Iterable[list],
    *,
    context: ProcessContext,
    workers: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
) -> Iterator[Any]:
    """`func(chunk)` for each of *chunks*, computed in *workers* processes of *context*,
    yielded in the order of *chunks*. *chunks* is read lazily, as workers need more (one
    ahead). An exception raised by *func* is raised here; a worker that dies raises
    `WorkerDied`."""
    numbered = enumerate(chunks)
    pool: list[_Worker] = []
    try:
        for _ in range(workers):
            from_parent, to_worker = context.Pipe(duplex=False)
            from_worker, to_parent = context.Pipe(duplex=False)
            process = context.Process(
                target=_serve,
                args=(func, from_parent, to_parent, initializer, initargs),
                daemon=True,
            )
            process.start()
            from_parent.close()  # the worker's ends: the parent keeps only its own
            to_parent.close()
            pool.append(_Worker(process, to_worker, from_worker))
        yield from _drive(pool, numbered)
    finally:
        _stop(pool)


def _drive(pool: list[_Worker], chunks: Iterator[tuple[int, list]]) -> Iterator[Any]:
    upcoming = next(chunks, None)

    def give(worker: _Worker) -> None:
        nonlocal upcoming
        if upcoming is not None:
            worker.chunk, chunk = upcoming
            worker.requests.send(chunk)
            upcoming = next(chunks, None)  # built while the workers work

    for worker in pool:
        give(worker)
    by_answers: dict[Any, _Worker] = {w.answers: w for w in pool}
    done: dict[int, Any] = {}  # answers that came before an earlier chunk's
    next_out = 0
    while busy := [w.answers for w in pool if w.chunk is not None]:
        for conn in wait(busy):
            worker = by_answers[conn]
            try:
                ok, payload = worker.answers.recv()
            except EOFError:
                worker.process.join(_JOIN_SECONDS)
                raise WorkerDied(
                    f"a worker process ended without answering (exit code "
                    f"{worker.process.exitcode}): killed, out of memory, or a crash"
                ) from None
            if not ok:
                raise payload
            done[worker.chunk] = payload  # type: ignore[index]
            worker.chunk = None
            give(worker)
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1


def _stop(pool: list[_Worker]) -> None:
    """End every worker: an idle one is told to exit; one still busy (the parent stopped
    early) is terminated."""
    for worker in pool:
        if worker.chunk is None:
            try:
                worker.requests.send(None)
            except OSError:
                pass  # it is gone already
        else:
            worker.process.terminate()
        worker.requests.close()
    for worker in pool:
        worker.process.join(_JOIN_SECONDS)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.answers.close()
