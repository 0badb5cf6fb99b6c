"""GSM8K as a sandbox :class:`Benchmark`: PostTrainBench's ``inspect_evals/gsm8k``.

PostTrainBench's ``src/eval/tasks/gsm8k/evaluate.py`` runs the ``gsm8k`` task of
inspect_evals at commit 06001a83e6d7c709c2ede0570dce7f1031a0bad8 (its
``src/inspect_evals/gsm8k/gsm8k.py``; the file is the same in the PyPI release
inspect-evals 0.3.103 apart from sample ids) with inspect-ai 0.3.150 and
``max_tokens=4000``. That task, with its defaults ``fewshot=10, fewshot_seed=42``:

* a system message (``system_message`` solver): 10 train items, the train split shuffled
  with seed 42 (Hugging Face ``Dataset.shuffle(seed=42)``: the permutation of
  ``numpy.random.default_rng(42)``) and its first 10 taken, each written by
  ``sample_to_fewshot`` and joined by blank lines; they are in ``fewshot.json``;
* the user message: :data:`MATH_PROMPT_TEMPLATE` (``prompt_template`` solver) around
  the question;
* the target: the text after the last ``####`` of the answer, as it is (``2,125``,
  ``-3``), scored by ``match(numeric=True)`` (ported in :mod:`.inspect_match`).

tests/task/test_gsm8k.py runs inspect_evals' own task function on the same data and
compares every sample and verdict.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from ..answers import HEDGE_FINDING
from ..base import Benchmark, ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from ..inspect_output import inspect_completion
from .extract import hedge
from .inspect_match import match_end

FEWSHOT_FILE = Path(__file__).with_name("fewshot.json")
FEWSHOT_SEED = 42
FEWSHOT_COUNT = 10
DELIM = "####"
# gsm8k.py's MATH_PROMPT_TEMPLATE (after its .strip()).
MATH_PROMPT_TEMPLATE = (
    "Solve the following math problem step by step. The last line of your response should "
    'be of the form "ANSWER: $ANSWER" (without quotes) where $ANSWER is the answer to the '
    "problem.\n\n{prompt}\n\nRemember to put your answer on its own line at the end in the "
    'form "ANSWER: $ANSWER" (without quotes) where $ANSWER is the answer to the problem, '
    "and you do not need to use a \\boxed command.\n\nReasoning:"
)


def split_answer(answer: str) -> tuple[str, str]:
    """gsm8k.py's ``record_to_sample``: (target, reasoning) of a GSM8K answer."""
    parts = answer.split(DELIM)
    target = parts.pop().strip()
    return target, DELIM.join(parts).strip()


def fewshot_text(question: str, answer: str) -> str:
    """gsm8k.py's ``sample_to_fewshot`` for one train item."""
    target, reasoning = split_answer(answer)
    return f"{question}\n\nReasoning:\n{reasoning}\n\nANSWER: {target}"


@cache
def fewshot_records() -> tuple[dict[str, Any], ...]:
    """The 10 few-shot train items, in order (``train_index``: their row in train.jsonl)."""
    records = json.loads(FEWSHOT_FILE.read_text(encoding="utf-8"))
    return tuple(records)


@cache
def system_prompt() -> str:
    """The system message of every sample: the few-shot examples."""
    return "\n\n".join(fewshot_text(r["question"], r["answer"]) for r in fewshot_records())


class Gsm8k(Benchmark):
    """1319 test problems, 10-shot; the score is inspect's ``match(numeric=True)`` (0 for
    a completion that hedges across several final answers)."""

    id = "gsm8k"
    name = "GSM8K"
    # The smoke variant's cap; PostTrainBench's max_tokens (4000) and its cascade are the
    # posttrainbench variant's, in plugin.json.
    generation = GenerationSettings(max_new_tokens=512, temperature=0.0)

    def build_messages(self, sample: Sample) -> list[Message]:
        return [
            {"role": "system", "content": system_prompt()},
            {
                "role": "user",
                "content": MATH_PROMPT_TEMPLATE.format(prompt=sample.data["question"]),
            },
        ]

    def target(self, sample: Sample) -> str:
        """The target inspect compares with (thousands separators and sign kept)."""
        return split_answer(sample.data["answer"])[0]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["question"], answer=data["answer"])

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        completion = inspect_completion(completion)  # what its scorer reads
        target = self.target(sample)
        try:
            answer, matched = match_end(completion, target)
        except (ValueError, OverflowError) as exc:  # inspect's scorer raises here too
            return ScoreResult(0.0, "no_answer", f"inspect's match fails: {exc}; target={target!r}")
        detail = f"match(numeric=True): answer={answer[-80:]!r}, target={target!r}"
        hedged = hedge(completion)
        if hedged:
            return ScoreResult(0.0, "hedged", f"{hedged}; {detail}", (HEDGE_FINDING,))
        if matched:
            return ScoreResult(1.0, None, detail)
        has_number = any(ch.isdigit() for ch in completion)
        return ScoreResult(0.0, "wrong_answer" if has_number else "no_answer", detail)
