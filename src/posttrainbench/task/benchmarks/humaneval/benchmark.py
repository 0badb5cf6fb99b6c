"""HumanEval as a sandbox :class:`Benchmark`: PostTrainBench's ``inspect_evals`` humaneval.

PostTrainBench's ``src/eval/tasks/humaneval/evaluate.py`` runs
``inspect_evals.humaneval.humaneval(sandbox="local")`` (inspect-evals 0.3.103, the same
``humaneval.py`` as its pinned commit 06001a83e6d7c709c2ede0570dce7f1031a0bad8; inspect-ai
0.3.150). That task, which this benchmark reproduces:

* one user message, :data:`INSTRUCTION` followed directly by the problem's prompt (the
  signature and docstring); no system message; ``generate()``, one epoch;
* the answer: ``find_code`` of the completion (:mod:`.extract`, verbatim);
* the verdict: ``prompt + answer + "\n" + test + "\n" + "check(entry_point)"`` passes when
  it runs to its end, within :data:`VERIFY_TIMEOUT_S` seconds.

The program runs in our contained referee instead of ``python -c`` in a local sandbox
(see :mod:`.execution`): the same text, split in two (the candidate process executes
prompt + answer, the referee the prompt and test, and ``check`` on the candidate's
plain return values). For honest code the verdict is the same as ``python -c``'s exit
status; code that ends the program early (``sys.exit(0)``), rigs ``__eq__`` or redefines
the tests' helpers passes there and fails here. tests/task/test_humaneval_inspect_parity.py
runs inspect's own task function and scorer and compares the messages, answers, program
texts and verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from .execution import ExecResult, Problem, run_check, run_checks
from .extract import answer, program

# humaneval.py's INSTRUCTION, verbatim (it ends in a blank line; the prompt follows).
INSTRUCTION = """
Read the following function signature and docstring, and fully implement
the function described. Your response should only contain the code for
this function.\n
"""
# humaneval.py's VERIFY_TIMEOUT: seconds per sample for its python -c.
VERIFY_TIMEOUT_S = 30.0


class HumanEval(Benchmark):
    """164 problems, one test split; the share of problems whose program passes."""

    id = "humaneval"
    name = "HumanEval"
    category = "humaneval"
    # The smoke variant's cap; PostTrainBench's max_tokens (4000) and its cascade are the
    # posttrainbench variant's, in plugin.json.
    generation = GenerationSettings(max_new_tokens=512, temperature=0.0)
    # inspect's limit covers python -c (start-up included); ours covers executing the
    # program and every call, the candidate's start-up and containment apart.
    timeout_s = VERIFY_TIMEOUT_S

    def build_messages(self, sample: Sample) -> list[Message]:
        """humaneval.py's ``record_to_sample``: ``input=INSTRUCTION + record["prompt"]``."""
        return [{"role": "user", "content": INSTRUCTION + sample.data["prompt"]}]

    def target(self, sample: Sample) -> str:
        """inspect's target (the canonical solution; its scorer does not read it)."""
        return sample.data["canonical_solution"]

    def problem(self, sample: Sample, completion: str) -> Problem:
        """The check of this model answer: the sealed prompt and test, inspect's answer."""
        d = sample.data
        return Problem(d["prompt"], answer(completion), d["test"], d["entry_point"])

    def program(self, sample: Sample, completion: str) -> str:
        """The program text inspect's ``verify()`` would run for *completion*."""
        p = self.problem(sample, completion)
        return program(p.prompt, p.completion, p.test, p.entry_point)

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["prompt"], answer=data.get("canonical_solution"))

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        return _to_score(run_check(self.problem(sample, completion), self.timeout_s))

    def score_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[ScoreResult]:
        """Checks run concurrently, one candidate process each, as many as there are CPUs."""
        problems = [self.problem(s, c) for s, c in zip(samples, completions)]
        return [_to_score(r) for r in run_checks(problems, self.timeout_s)]


def _to_score(result: ExecResult) -> ScoreResult:
    if result.passed:
        return ScoreResult(1.0, None, result.result)
    error = "timed_out" if result.result == "timed out" else "failed"
    return ScoreResult(0.0, error, result.result)
