"""Scorer attacks on the extracted-answer benchmarks: GSM8K, AIME, GPQA and BFCL (host tier).

A model trained against a last-number or last-letter rule can list candidates and let
the rule pick. Each attempt below must score 0 and be reported as ``hedged_answer``;
each carries a control that shows the plain extraction rule (lm-eval's
flexible-extract, the last box, the last ANSWER line) would have paid it. BFCL's
calls, scored by exact equality of one tool call, are checked for guesses that could
offer several values.
"""

from __future__ import annotations

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.aime.benchmark import extract_answer
from posttrainbench.task.benchmarks.answers import HEDGE_FINDING, extract_letter
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.bfcl.tools import tools_json
from posttrainbench.task.benchmarks.gsm8k.extract import judge

GSM8K = Sample(
    id="gsm8k_test_x",
    category="gsm8k",
    data={
        "question": "A shop sells 1,200 pens at $2 each. How much money does it make?",
        "answer": "It makes 1200 * 2 = $<<1200*2=2400>>2,400.\n#### 2,400",
        "target": "2400",
    },
)
AIME = Sample(
    id="aime2025_x", category="aime2025", data={"problem": "Find the remainder ...", "answer": 70}
)
GPQA = Sample(
    id="gpqa_x",
    category="Physics",
    data={
        "question": "Which particle is a fermion?",
        "choices": ["Photon", "Electron", "Gluon", "Higgs boson"],
        "answer": "B",
        "subdomain": "Quantum Mechanics",
        "record_id": "x",
    },
)

GSM8K_HEDGES = {
    "every number up to the answer": " ".join(str(n) for n in range(0, 2401)),
    "several numbers after ####": "1200 * 2 is about 2,400.\n#### 2398 2399 2400",
    "alternatives after ####": "#### 2399 or 2400",
    "three #### answers": "#### 2398\n#### 2399\n#### 2400",
    "a list of guesses": "The answer is one of: 2391, 2392, 2393, 2394, 2395, 2396, 2397, 2398, 2399, 2400",
}
AIME_HEDGES = {
    "a box per guess": r"\boxed{68} \boxed{69} \boxed{70}",
    "every answer boxed": " ".join(rf"\boxed{{{n}}}" for n in range(0, 71)),
    "alternatives in the box": r"The answer is \boxed{69 \text{ or } 70}",
    "a list in the box": r"\boxed{69, 70}",
    "alternatives on the last line": "So the remainder is 69 or 70",
}
GPQA_HEDGES = {
    "alternatives on the ANSWER line": "ANSWER: B or C",
    "a list on the ANSWER line": "ANSWER: B, C, A, D",
    "alternatives in parentheses": "ANSWER: (B) / (D)",
    "an ANSWER line per choice": "ANSWER: A\nANSWER: C\nANSWER: B",
    "alternatives in prose": "The answer is B or D.",
    "a box per choice": r"\boxed{D} \boxed{A} \boxed{B}",
}
# Controls: what each plain rule extracts (the attempt would be paid where it is the answer).
PAID_BY_PLAIN_RULE = {
    "every number up to the answer",
    "several numbers after ####",
    "alternatives after ####",
    "three #### answers",
    "a list of guesses",
    "a box per guess",
    "every answer boxed",
    "alternatives on the last line",
    "alternatives on the ANSWER line",
    "a list on the ANSWER line",
    "alternatives in parentheses",
    "an ANSWER line per choice",
    "alternatives in prose",
    "a box per choice",
}


def assert_hedge_caught(result) -> None:
    assert (
        result.score == 0.0
        and result.error_type == "hedged"
        and result.findings == (HEDGE_FINDING,)
    ), result


@pytest.mark.parametrize("name", sorted(GSM8K_HEDGES))
def test_gsm8k_hedges_score_zero(name):
    completion = GSM8K_HEDGES[name]
    assert judge(completion, GSM8K.data["answer"]).flexible_correct == (name in PAID_BY_PLAIN_RULE)
    assert_hedge_caught(get_benchmark("gsm8k").score(GSM8K, completion))


@pytest.mark.parametrize("name", sorted(AIME_HEDGES))
def test_aime_hedges_score_zero(name):
    completion = AIME_HEDGES[name]
    assert (extract_answer(completion)[0] == 70) == (name in PAID_BY_PLAIN_RULE)
    assert_hedge_caught(get_benchmark("aime2025").score(AIME, completion))


@pytest.mark.parametrize("name", sorted(GPQA_HEDGES))
def test_gpqa_hedges_score_zero(name):
    completion = GPQA_HEDGES[name]
    assert (extract_letter(completion) == "B") == (name in PAID_BY_PLAIN_RULE)
    assert_hedge_caught(get_benchmark("gpqamain").score(GPQA, completion))


@pytest.mark.parametrize(
    "bench_id,sample,completion",
    [
        ("gsm8k", GSM8K, "#### 100\nWait, that's wrong: 1200 * 2 = 2400. #### 2,400"),
        ("aime2025", AIME, r"First guess \boxed{16}. Re-checking, the sum is \boxed{070}."),
        ("gpqamain", GPQA, "I first thought A, but on reflection it is B.\nANSWER: B"),
        ("gsm8k", GSM8K, "1,200 pens at $2 each: 1200 * 2 = 2400 dollars.\n#### $2,400"),
        ("aime2025", AIME, r"From 21 and 49, the answer is $\boxed{70}$."),
    ],
)
def test_one_correction_is_not_a_hedge(bench_id, sample, completion):
    """A model that corrects itself once, then answers, commits to one answer: it is paid."""
    assert get_benchmark(bench_id).score(sample, completion).score == 1.0


BFCL = Sample(
    id="exec_simple_x",
    category="exec_simple",
    data={
        "question": [{"role": "user", "content": "Area of a triangle with base 10 and height 5?"}],
        "tools": tools_json(
            [
                {
                    "name": "triangle_area",
                    "description": "Area of a triangle.",
                    "parameters": {
                        "type": "dict",
                        "properties": {
                            "base": {"type": "integer", "description": "The base."},
                            "height": {"type": "integer", "description": "The height."},
                            "unit": {"type": "string", "description": "The unit."},
                        },
                        "required": ["base", "height"],
                    },
                }
            ]
        ),
        "ground_truth": "triangle_area(base=10, height=5)",
    },
)


def bfcl_call(arguments: str) -> str:
    return f'<tool_call>\n{{"name": "triangle_area", "arguments": {arguments}}}\n</tool_call>'


# BFCL is scored as PostTrainBench scores it (inspect_evals' bfcl_scorer): exactly one
# tool call whose arguments equal the target's, so nothing can offer two values.
BFCL_WRONG = {
    "an extra argument": (bfcl_call('{"base": 10, "height": 5, "unit": "m"}'), "wrong_arguments"),
    "one call per guess": (
        bfcl_call('{"base": 11, "height": 5}') + bfcl_call('{"base": 10, "height": 5}'),
        "wrong_count",
    ),
    "a list of guesses for a scalar": (
        bfcl_call('{"base": [10, 11], "height": 5}'),
        "wrong_arguments",
    ),
    "alternatives in one string": (
        bfcl_call('{"base": "10 or 11", "height": 5}'),
        "wrong_arguments",
    ),
    "a call per guess, one of them broken": (
        bfcl_call('{"base": 10, "height": 5}') + "<tool_call>{base: 11}</tool_call>",
        "no_tool_call",
    ),
}


@pytest.mark.parametrize("name", sorted(BFCL_WRONG))
def test_bfcl_guesses_score_zero(name):
    text, error = BFCL_WRONG[name]
    result = get_benchmark("bfcl").score(BFCL, text)
    assert result.score == 0.0 and result.error_type == error, result


def test_bfcl_repeated_key_keeps_only_the_last_value():
    """json.loads (vLLM's hermes parser) keeps the last of a repeated key: one value counts."""
    bench = get_benchmark("bfcl")
    assert not bench.score(BFCL, bfcl_call('{"base": 10, "base": 11, "height": 5}')).correct
    assert bench.score(BFCL, bfcl_call('{"base": 11, "base": 10, "height": 5}')).correct


def test_bfcl_right_call_passes():
    assert get_benchmark("bfcl").score(BFCL, bfcl_call('{"height": 5, "base": 10}')).correct
