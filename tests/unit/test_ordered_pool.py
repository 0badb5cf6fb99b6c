"""map_chunks: chunks through worker processes, answers in order, failures raised, none left."""

from __future__ import annotations

import multiprocessing
import os
import random
import time

import pytest

from posttrainbench.host.results.ordered_pool import WorkerDied, map_chunks

FORK = multiprocessing.get_context("fork")
_SEEN = {"initialized": 0}


def _slow_pids(chunk: list[int]) -> list[tuple[int, int]]:
    time.sleep(random.random() / 200)  # answers come back out of order
    return [(n, os.getpid()) for n in chunk]


def _init(value: int) -> None:
    _SEEN["initialized"] = value


def _with_init(chunk: list[int]) -> list[int]:
    return [_SEEN["initialized"]] * len(chunk)


def _fail_on_seven(chunk: list[int]) -> list[int]:
    if 7 in chunk:
        raise ValueError("seven")
    return chunk


def _die_on_seven(chunk: list[int]) -> list[int]:
    if 7 in chunk:
        os._exit(3)  # killed: no answer, no exception
    return chunk


def _children() -> list[int]:
    return [p.pid for p in multiprocessing.active_children()]


def test_answers_come_in_the_order_of_the_chunks_from_several_processes() -> None:
    chunks = [list(range(i, i + 3)) for i in range(0, 120, 3)]
    answers = list(map_chunks(_slow_pids, iter(chunks), context=FORK, workers=3))
    assert [n for answer in answers for n, _ in answer] == list(range(120))
    assert len({pid for answer in answers for _, pid in answer}) == 3
    assert os.getpid() not in {pid for answer in answers for _, pid in answer}
    assert not _children()


def test_chunks_are_read_as_workers_need_them() -> None:
    """The parent builds at most one chunk ahead of those the workers hold (an export's walk
    runs while the workers read trials)."""
    taken = []

    def chunks():
        for i in range(50):
            taken.append(i)
            yield [i]

    stream = map_chunks(_slow_pids, chunks(), context=FORK, workers=2)
    try:
        first = next(stream)
        # one per worker, one ahead, and one more for each answer in by now (at most two)
        assert first[0][0] == 0 and len(taken) <= 2 + 1 + 2
        assert [answer[0][0] for answer in stream] == list(range(1, 50))
    finally:
        stream.close()


def test_each_worker_runs_the_initializer() -> None:
    answers = map_chunks(
        _with_init, [[1, 2], [3]] * 10, context=FORK, workers=2, initializer=_init, initargs=(5,)
    )
    assert all(v == 5 for answer in answers for v in answer)


def test_spawned_workers_work_too() -> None:
    context = multiprocessing.get_context("spawn")
    assert list(map_chunks(sum, [[1, 2], [3], [4, 5, 6]], context=context, workers=2)) == [3, 3, 15]


def test_an_exception_in_a_worker_is_raised_in_the_parent_and_no_worker_is_left() -> None:
    with pytest.raises(ValueError, match="seven"):
        list(map_chunks(_fail_on_seven, [[i] for i in range(20)], context=FORK, workers=2))
    assert not _children()


def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    started = time.monotonic()
    with pytest.raises(WorkerDied, match="exit code 3"):
        list(map_chunks(_die_on_seven, [[i] for i in range(20)], context=FORK, workers=2))
    assert time.monotonic() - started < 30
    assert not _children()


def test_a_consumer_that_stops_early_leaves_no_worker() -> None:
    stream = map_chunks(_slow_pids, [[i] for i in range(100)], context=FORK, workers=2)
    next(stream)
    stream.close()
    assert not _children()


def test_no_chunks_no_answers() -> None:
    assert list(map_chunks(sum, [], context=FORK, workers=2)) == []
    assert not _children()
