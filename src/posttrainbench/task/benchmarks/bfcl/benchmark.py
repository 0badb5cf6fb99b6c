"""BFCL ``exec_simple`` as PostTrainBench evaluates it (inspect_evals' ``bfcl()``).

The prompt is the record's messages with the function docs as chat-template ``tools``
(:mod:`.tools`), no instructions of ours; the completion goes through vLLM's hermes
tool-call parser (:mod:`.hermes`) and inspect_evals' ``bfcl_scorer`` (:mod:`.scoring`).
"""

from __future__ import annotations

import json
from typing import Any

from ..base import (
    Benchmark,
    ContaminationText,
    GenerationSettings,
    Message,
    Sample,
    ScoreResult,
    messages_text,
)
from .hermes import cannot_become_single_call
from .scoring import parse_target, score_completion


class BfclExecSimple(Benchmark):
    """100 single-function questions (BFCL v3 ``exec_simple``); one test split."""

    id = "bfcl"
    name = "BFCL exec_simple"
    category = "exec_simple"
    # The smoke variant's cap (was 96 for the ``[f(a=1)]`` text form): a hermes JSON
    # call is longer; the longest of the 100 ground-truth calls, tags included, is 160
    # SmolLM2 tokens. The posttrainbench variant's caps come from plugin.json.
    generation = GenerationSettings(max_new_tokens=160, temperature=0.0)

    def build_messages(self, sample: Sample) -> list[Message]:
        return [{"role": m["role"], "content": m["content"]} for m in sample.data["question"]]

    def tools(self, sample: Sample) -> list[dict[str, Any]]:
        """The tool list as vLLM hands it to the chat template (stored in order)."""
        return json.loads(sample.data["tools"])

    def cannot_succeed(self, completion_prefix: str) -> bool:
        return cannot_become_single_call(completion_prefix)

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question and its ground-truth call a contaminated training file would contain."""
        return ContaminationText(
            question=messages_text(data["question"]),
            answer=data.get("ground_truth") if isinstance(data.get("ground_truth"), str) else None,
        )

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        target = parse_target(sample.data["ground_truth"])
        verdict = score_completion(completion, target, self.tools(sample))
        return ScoreResult(1.0 if verdict.correct else 0.0, verdict.error_type, verdict.detail)
