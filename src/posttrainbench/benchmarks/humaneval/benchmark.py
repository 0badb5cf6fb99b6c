"""HumanEval as a sandbox :class:`Benchmark`: pass@1 by executing the problem's tests.

The tests run in the trusted scorer against a contained candidate process that runs
the model's code (see :mod:`.execution`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from .execution import DEFAULT_TIMEOUT_S, ExecResult, Problem, run_check, run_checks
from .extract import to_completion

INSTRUCTION = (
    "Read the following function signature and docstring, and fully implement the function "
    "described. Reply with the complete function (including any imports it needs) in a single "
    "```python code block, and nothing else.\n\n"
)


class HumanEval(Benchmark):
    """164 problems, one test split; greedy decoding, 512 new tokens (room for one function
    with some preamble; the longest canonical solutions are far shorter)."""

    id = "humaneval"
    name = "HumanEval"
    category = "humaneval"
    generation = GenerationSettings(max_new_tokens=512, temperature=0.0)
    timeout_s = DEFAULT_TIMEOUT_S

    def build_messages(self, sample: Sample) -> list[Message]:
        return [
            {"role": "user", "content": INSTRUCTION + "```python\n" + sample.data["prompt"] + "```"}
        ]

    def problem(self, sample: Sample, completion: str) -> Problem:
        """The check of this model answer: the sealed prompt and test, the answer as a completion."""
        d = sample.data
        return Problem(
            d["prompt"], to_completion(completion, d["entry_point"]), d["test"], d["entry_point"]
        )

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
