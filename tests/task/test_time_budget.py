"""The verifier's time limits: derived from the work and the first batch's throughput, within the deadline."""

from __future__ import annotations

import json
import time

import pytest

from posttrainbench.task.benchmarks.base import GenerationSettings
from posttrainbench.task.evaluation import time_budget
from posttrainbench.task.evaluation.progress import ProgressFile
from posttrainbench.task.evaluation.runner import generate_with_retries
from posttrainbench.task.evaluation.time_budget import (
    Deadline,
    Throughput,
    Work,
    first_batch_limit,
    first_batch_size,
    rest_limit,
)
from posttrainbench.task.schemas import VerifierProgress


class PacedBackend:
    """Takes *per_question_s* per question; stalls (a hang) on calls after the first above *stall_above* tokens."""

    name = "paced"

    def __init__(self, per_question_s: float, stall_above: int | None = None):
        self.per_question_s = per_question_s
        self.stall_above = stall_above
        self.calls: list[tuple[int, int]] = []  # (questions, max_new_tokens)

    def generate(self, prompts, settings, seed=0, stop_fn=None, progress=None):
        first_of_attempt = not self.calls or self.calls[-1][1] != settings.max_new_tokens
        self.calls.append((len(prompts), settings.max_new_tokens))
        if (
            self.stall_above is not None
            and not first_of_attempt
            and settings.max_new_tokens > self.stall_above
        ):
            time.sleep(30)
        for _ in prompts:
            time.sleep(self.per_question_s)
            if progress:
                progress(1)
        return [f"{p}:{settings.max_new_tokens}" for p in prompts]


def test_the_limit_scales_with_the_work_and_the_measured_throughput():
    deadline = Deadline.after(10_000)
    rate = Throughput.measure(Work(questions=16, max_new_tokens=100), seconds=8.0)  # 200 units/s
    assert rate.units_per_s == pytest.approx(200)
    one = rest_limit(Work(34, 100), rate, deadline) - time_budget.GRACE_S
    assert one == pytest.approx(time_budget.SAFETY * 34 * 100 / 200)
    assert rest_limit(Work(68, 100), rate, deadline) - time_budget.GRACE_S == pytest.approx(2 * one)
    assert rest_limit(Work(34, 200), rate, deadline) - time_budget.GRACE_S == pytest.approx(2 * one)
    # A machine measured 5 times slower gets 5 times the time: slow, not cut.
    slow = Throughput(rate.units_per_s / 5)
    assert rest_limit(Work(34, 100), slow, deadline) - time_budget.GRACE_S == pytest.approx(5 * one)


def test_no_limit_is_above_the_verifier_timeout():
    now = 1_000.0
    deadline = Deadline.for_verifier(
        timeout_s=600, started_at=now - 100
    )  # 500 s left, less the reserve
    left = 500 - time_budget.RESERVE_S
    assert deadline.left_s(now) == pytest.approx(left)
    crawling = Throughput(0.001)
    assert rest_limit(Work(1000, 512), crawling, deadline, now=now) == pytest.approx(left)
    assert first_batch_limit(deadline, now=now) == pytest.approx(
        left * time_budget.FIRST_BATCH_SHARE
    )
    # The last attempt (no retry after it) gets all the time left.
    assert first_batch_limit(deadline, last_attempt=True, now=now) == pytest.approx(left)
    assert rest_limit(
        Work(1, 1), Throughput(1e9), deadline, last_attempt=True, now=now
    ) == pytest.approx(left)
    # Past the deadline an attempt still gets a token limit and fails fast.
    assert rest_limit(Work(1, 1), crawling, deadline, now=now + 10_000) == time_budget.MIN_LIMIT_S
    assert (
        first_batch_size(50, 16) == 16
        and first_batch_size(5, 16) == 5
        and first_batch_size(0, 16) == 1
    )


def test_throughput_is_measured_on_the_first_batch_and_recorded(tmp_path):
    backend = PacedBackend(per_question_s=0.01)
    progress = ProgressFile(tmp_path, "final_model", min_interval_s=0.0)
    out, attempts = generate_with_retries(
        backend,
        [str(i) for i in range(10)],
        GenerationSettings(max_new_tokens=256),
        0,
        None,
        Deadline.after(3600),
        log=lambda _: None,
        progress=progress,
        batch_size=4,
    )
    assert len(out) == 10 and backend.calls == [
        (4, 256),
        (6, 256),
    ]  # the first batch, then the rest
    (attempt,) = attempts
    # 4 questions in ~0.04 s predicts ~0.06 s for the other 6: the limit is SAFETY times that, plus grace.
    assert (
        time_budget.GRACE_S < attempt.time_limit_s < time_budget.GRACE_S + time_budget.SAFETY * 0.5
    )
    state = VerifierProgress.model_validate_json((tmp_path / "progress.json").read_text())
    assert (state.phase, state.done, state.total, state.attempt) == ("final_model", 10, 10, 1)
    assert state.questions_per_min > 0


def test_the_cascade_still_retries_a_real_failure(monkeypatch):
    # Keep the derived limit short so that the hang is cut within a second.
    monkeypatch.setattr(time_budget, "GRACE_S", 0.3)
    monkeypatch.setattr(time_budget, "MIN_LIMIT_S", 0.1)
    backend = PacedBackend(per_question_s=0.001, stall_above=64)
    lines: list[str] = []
    t0 = time.monotonic()
    out, attempts = generate_with_retries(
        backend,
        [str(i) for i in range(8)],
        GenerationSettings(max_new_tokens=128),
        0,
        None,
        Deadline.after(3600),
        log=lines.append,
        batch_size=2,
    )
    assert time.monotonic() - t0 < 5 and out[0] == "0:64"
    assert [(a.max_new_tokens, a.ok) for a in attempts] == [(128, False), (64, True)]
    assert "AttemptTimeout" in attempts[0].error and attempts[0].time_limit_s < 1.0
    # The retry is the last attempt: it may use all the time left.
    assert attempts[1].time_limit_s > 3000 and len(lines) == 2


def test_a_slow_machine_gives_a_slow_score_not_a_retry():
    backend = PacedBackend(per_question_s=0.05)  # uniformly slow: the first batch says so
    out, attempts = generate_with_retries(
        backend,
        [str(i) for i in range(12)],
        GenerationSettings(max_new_tokens=256),
        0,
        None,
        Deadline.after(3600),
        log=lambda _: None,
        batch_size=4,
    )
    assert len(out) == 12 and [(a.max_new_tokens, a.ok) for a in attempts] == [(256, True)]


def test_progress_file_is_json_the_host_can_read(tmp_path):
    progress = ProgressFile(tmp_path, "base_model", min_interval_s=3600)
    progress.start_attempt(total=5, attempt=2, max_new_tokens=48)
    progress.advance(2)  # within the interval: not written yet
    assert json.loads((tmp_path / "progress.json").read_text())["done"] == 0
    progress.advance(10)  # capped at the total, and the last answer is always written
    state = VerifierProgress.model_validate_json((tmp_path / "progress.json").read_text())
    assert (state.phase, state.done, state.total, state.attempt, state.max_new_tokens) == (
        "base_model",
        5,
        5,
        2,
        48,
    )
    assert not list(tmp_path.glob(".progress-*"))
