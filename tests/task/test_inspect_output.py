"""Scorers read what inspect's scorers read: the reply without its first think block."""

from __future__ import annotations

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.inspect_output import inspect_completion

reasoning = pytest.importorskip("inspect_ai.model._reasoning")

REPLIES = [
    "ANSWER: 5",
    "<think>maybe 4</think>\nANSWER: 5",
    '<think signature="abc">4? 6?</think>ANSWER: 5',
    '<think redacted="true">x</think> ANSWER: 5',
    "<think>a</think> mid <think>b</think> ANSWER: 5",
    "no open tag </think> ANSWER: 5",
    "<think>never closed ANSWER: 5",
    "  spaced  ",
]


@pytest.mark.parametrize("reply", REPLIES)
def test_the_completion_is_inspects(reply: str) -> None:
    content, capsule = reasoning.parse_content_with_reasoning(reply)
    expected = content if capsule is not None else reply
    assert inspect_completion(reply) == expected


def test_a_number_only_in_the_thinking_does_not_count() -> None:
    sample = Sample(id="g", category="gsm8k", data={"question": "q", "answer": "#### 5"})
    gsm8k = get_benchmark("gsm8k")
    assert gsm8k.score(sample, "<think>It is 5.</think>\nI am not sure.").score == 0.0
    assert gsm8k.score(sample, "<think>4 or 6?</think>\nANSWER: 5").score == 1.0
