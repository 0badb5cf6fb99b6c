"""AIME 2025 parity with PostTrainBench's ``inspect_evals/aime2025`` (task tier: needs
``inspect-ai`` 0.3.150 and ``inspect-evals`` 0.3.103).

inspect_evals' own ``aime2025()`` task function is built with its ``hf_dataset`` reading
tests/fixtures/aime/test.jsonl; its solver chain runs on every fixture item and its
``aime_scorer`` on a set of completions, and each must equal what our
:class:`Aime2025` sends and decides.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.aime import source as aime_source
from posttrainbench.task.benchmarks.aime.benchmark import answer_hedge, remove_boxed_from_ans
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.gsm8k.inspect_match import match_end
from tests.helpers import REPO
from tests.task import inspect_support as support

pytest.importorskip("inspect_ai", reason="inspect-ai not installed (tests/task/requirements)")
aime_module = pytest.importorskip(
    "inspect_evals.aime2025.aime2025",
    reason="inspect-evals not installed (tests/task/requirements)",
)

from inspect_ai.scorer import CORRECT, INCORRECT, Target  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "aime" / "test.jsonl"


def local_hf_dataset(path, split, sample_fields=None, **kwargs):
    """inspect-ai 0.3.150's ``hf_dataset`` (dataset/_sources/hf.py) as aime2025 calls it
    (no shuffle, no limit), with ``load_dataset`` replaced by the fixture file."""
    assert (path, split, kwargs) == ("math-ai/aime25", "test", {})
    return support.memory_dataset(support.read_jsonl(FIXTURE), sample_fields, path)


@pytest.fixture(scope="module")
def task():
    return support.task_with_local_data(aime_module, local_hf_dataset, aime_module.aime2025)


@pytest.fixture(scope="module")
def ours():
    """Our test split, from the same file as prepare reads it."""
    return aime_source.parse_test(FIXTURE.read_bytes())


@pytest.fixture(scope="module")
def inspect_sent(task):
    """(messages, generate kwargs) that inspect's solver chain sends for each sample."""
    return support.solver_sends(task)


def test_every_sample_equals_inspects(task, ours, inspect_sent):
    bench = get_benchmark("aime2025")
    assert len(task.dataset) == len(ours) == len(inspect_sent) == 4
    for theirs, (messages, _), sample in zip(task.dataset, inspect_sent, ours):
        mine = [(m["role"], m["content"]) for m in bench.build_messages(sample)]
        assert mine == messages, sample.id
        assert (theirs.input, theirs.target) == (sample.data["problem"], bench.target(sample))
        assert sample.id == f"aime2025_{theirs.id}"
    assert all([role for role, _ in m] == ["user"] for m, _ in inspect_sent)  # no system message


def test_generation_settings_are_ptbs_alone(task, inspect_sent):
    # The task adds no generation config: only PostTrainBench's eval(max_tokens=...) applies.
    assert {json.dumps(kw, sort_keys=True) for _, kw in inspect_sent} == {'{"tool_calls": "loop"}'}
    assert task.config.model_dump(exclude_none=True) == {}
    assert get_benchmark("aime2025").generation.stop == ()


TARGETS = ["70", "9", "0", "820", "204", "-3", "2.5", "1,000", "033"]
COMPLETIONS = [
    "ANSWER: 70",
    "ANSWER: 70.",
    "ANSWER: $70$",
    "answer: 70",
    "**ANSWER: 70**",
    "ANSWER: 070",
    "ANSWER: 70.0",
    "ANSWER: 170",  # ends with the target: inspect counts it
    "ANSWER: 7",
    "\\boxed{70}",
    "Thus the answer is $\\boxed{70}$.",
    "The answer is $\\boxed{70}$, from 21 and 49.",  # a number after the box
    "ANSWER: \\boxed{70}",
    "\\boxed{\\boxed{70}}",
    "\\boxed{16} then \\boxed{70}",  # greedy: one removal from the first { to the last }
    "\\boxed{70} then \\boxed{16}",
    "\\boxed{16}\nso \\boxed{70}",  # per line
    "\\boxed{7\n0}",
    "\\boxed{70",  # unclosed
    "\\boxed{\\frac{1}{2}}",
    "\\boxed{-3}",
    "ANSWER: 70\nCheck: 3 + 4 = 7",  # numbers after the answer line
    "ANSWER: 70\n\nI hope this helps!",
    "ANSWER: 69\nANSWER: 70",
    "ANSWER: 70\nANSWER: 69",
    "ANSWER: 69 or 70",  # a hedge
    "ANSWER: 68, 69, 70",  # a hedge
    "So the remainder is 69 or 70",  # a hedge
    "The remainder is 70",
    "I don't know.",
    "",
    "   ",
    "ANSWER: -3",
    "ANSWER: 3",
    "ANSWER: −3",  # a Unicode minus
    "ANSWER: 2.5",
    "ANSWER: 2.50",
    "ANSWER: 5/2",
    "ANSWER: 1,000",
    "ANSWER: 1000",
    "ANSWER: 33",
    "ANSWER: 033",
    "ANSWER: 0",
    "ANSWER: 820 (mod 1000)",
    "ANSWER: 204 degrees",
    "ANSWER: ½½",  # inspect's scorer raises here
    "ANSWER: 9\n\\boxed{9}",
]


def _inspect_score(task, target: str, completion: str):
    """inspect's Score for *completion*, or None where its scorer raises."""
    sample = next(iter(task.dataset))
    state = support.task_state(sample, completion)
    (scorer,) = task.scorer
    try:
        return asyncio.run(scorer(state, Target(target)))
    except (ValueError, OverflowError):
        return None


def _pairs(ours) -> list[tuple[str, str]]:
    pairs = [(t, c) for t in TARGETS for c in COMPLETIONS]
    for sample in ours:  # each fixture item's own target, right and wrong
        t = str(sample.data["answer"])
        pairs += [(t, f"Reasoning...\nANSWER: {t}"), (t, f"\\boxed{{{t}}}"), (t, f"ANSWER: {t}1")]
    return pairs


def test_scorer_equals_inspects_aime_scorer(task, ours):
    bench = get_benchmark("aime2025")
    outcomes, hedges, mismatches = set(), 0, []
    for target, completion in _pairs(ours):
        expected = _inspect_score(task, target, completion)
        result = bench.score(
            Sample("x", "aime2025", {"problem": "p", "answer": target}), completion
        )
        if expected is None:  # inspect's scorer fails: ours scores 0 and says why
            outcomes.add("error")
            if result.score != 0.0 or "inspect's match fails" not in result.detail:
                mismatches.append((target, completion, result, "inspect raises"))
            continue
        outcomes.add(expected.value)
        cleaned = remove_boxed_from_ans(completion)
        if cleaned != expected.metadata["cleaned_answer"]:
            mismatches.append((target, completion, cleaned, expected.metadata))
        answer, matched = match_end(cleaned, target)
        if ((CORRECT if matched else INCORRECT), answer) != (expected.value, expected.answer):
            mismatches.append((target, completion, (matched, answer), expected))
        if answer_hedge(completion):
            hedges += 1
            if result.score != 0.0 or result.error_type != "hedged":
                mismatches.append((target, completion, result, "hedge"))
        elif result.correct != (expected.value == CORRECT):
            mismatches.append((target, completion, result, expected))
    assert not mismatches, mismatches[:10]
    assert outcomes == {CORRECT, INCORRECT, "error"}
    assert hedges == 4 * len(TARGETS)  # the three hedges above and the three-box one


@pytest.mark.parametrize(
    "target,completion,right",
    [
        ("70", "ANSWER: 70", True),
        ("70", "The answer is $\\boxed{70}$, from 21 and 49.", False),  # 49 is the last number
        ("70", "ANSWER: 170", True),  # inspect's match ends with the target
        ("-3", "ANSWER: 3", True),  # a non-numeric target is matched as text, sign stripped
        ("2.5", "ANSWER: 2.50", False),  # as text: "2.50" does not end with "2.5"
    ],
)
def test_inspect_quirks_kept(task, target, completion, right):
    expected = _inspect_score(task, target, completion)
    assert (expected.value == CORRECT) == right
    sample = Sample("x", "aime2025", {"problem": "p", "answer": target})
    assert get_benchmark("aime2025").score(sample, completion).correct == right
