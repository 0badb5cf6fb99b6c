"""Base class of the benchmarks scored by an LLM judge or grader."""

from __future__ import annotations

from .base import Benchmark
from .llm_judge import JudgeClient, make_judge


class JudgedBenchmark(Benchmark):
    """A benchmark whose ``score_batch`` asks an LLM; ``default_judge_model`` names it."""

    uses_llm_judge = True
    default_judge_model: str

    def __init__(self, judge: JudgeClient | None = None):
        self._judge = judge  # None: chosen from the environment at first use

    def judge(self) -> JudgeClient:
        """The judge client (``PTB_JUDGE_MODEL`` / ``PTB_JUDGE_RECORDINGS``, see llm_judge).

        Calling it before generating checks the judge's configuration early: it raises
        :class:`~posttrainbench.task.benchmarks.llm_judge.JudgeConfigError` when unusable.
        """
        if self._judge is None:
            self._judge = make_judge(self.default_judge_model)
        return self._judge
