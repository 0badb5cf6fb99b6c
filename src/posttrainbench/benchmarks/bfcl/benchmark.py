"""BFCL v4 ``simple_python`` as a sandbox :class:`Benchmark`."""

from __future__ import annotations

import json
from typing import Any

from ..answers import HEDGE_FINDING
from ..base import (
    Benchmark,
    ContaminationText,
    GenerationSettings,
    Message,
    Sample,
    ScoreResult,
    messages_text,
)
from .checker import check_simple_call
from .decode import DecodeError, HedgedCallError, cannot_become_call, decode_calls
from .prompt import build_messages


class BfclSimplePython(Benchmark):
    """400 single-function python questions; one test split (BFCL has no train split)."""

    id = "bfcl"
    name = "BFCL v4 simple_python"
    category = "simple_python"
    generation = GenerationSettings(max_new_tokens=96, temperature=0.0)

    def build_messages(self, sample: Sample) -> list[Message]:
        return build_messages(sample.data["function"], sample.data["question"])

    def cannot_succeed(self, completion_prefix: str) -> bool:
        return cannot_become_call(completion_prefix)

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(
            question=messages_text(data["question"]),
            passage=json.dumps(data.get("function"), sort_keys=True),
        )

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        try:
            calls = decode_calls(completion)
        except HedgedCallError as exc:
            return ScoreResult(0.0, "hedged", str(exc), (HEDGE_FINDING,))
        except DecodeError as exc:
            return ScoreResult(0.0, "decode_error", str(exc))
        check = check_simple_call(sample.data["function"][0], calls, sample.data["ground_truth"])
        return ScoreResult(1.0 if check.valid else 0.0, check.error_type, check.detail)
