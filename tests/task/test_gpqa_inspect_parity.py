"""GPQA parity with PostTrainBench's ``gpqa_main`` task (task tier: needs ``inspect-ai``
0.3.150).

PostTrainBench's own ``src/eval/tasks/gpqamain/evaluate.py`` (a verbatim copy in
tests/fixtures/gpqa) builds its task with inspect's ``hf_dataset`` reading
tests/fixtures/gpqa/gpqa_main.csv. Its solver ``multiple_choice(cot=True)`` runs on every
fixture item and, with each completion given as the model's output, its scorer
``choice()`` decides; every message and verdict must equal ours. The dataset's
``shuffle_choices=True`` (``random.Random(None)``) is run with our per-question seed,
and once more with a random seed, our sample then taking inspect's order.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import importlib.machinery
import importlib.util
import io
import random

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.answers import letter_hedge
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.gpqa import source as gpqa_source
from posttrainbench.task.benchmarks.gpqa.benchmark import parse_answer
from tests.helpers import REPO
from tests.task import inspect_support as support

pytest.importorskip("inspect_ai", reason="inspect-ai not installed (tests/task/requirements)")

from inspect_ai.dataset import MemoryDataset
from inspect_ai.scorer import CORRECT, INCORRECT, Target
from inspect_ai.solver._multiple_choice import parse_answers

FIXTURES = REPO / "tests" / "fixtures" / "gpqa"
PTB_EVALUATE = FIXTURES / "ptb_gpqamain_evaluate.py.txt"
PTB_EVALUATE_SHA256 = "cd1fbea148951874e2113ed9f0a329e824fd033b746ea011f9e7035011f071dd"
CSV_FILE = FIXTURES / "gpqa_main.csv"


def _ptb_module():
    """PostTrainBench's evaluate.py imported as a module (its ``main`` is not run)."""
    assert hashlib.sha256(PTB_EVALUATE.read_bytes()).hexdigest() == PTB_EVALUATE_SHA256
    loader = importlib.machinery.SourceFileLoader("ptb_gpqamain_evaluate", str(PTB_EVALUATE))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _records() -> list[dict]:
    """The CSV's rows as ``datasets``' CSV reader gives them (an empty cell is None)."""
    rows = csv.DictReader(io.StringIO(CSV_FILE.read_text(encoding="utf-8"), newline=""))
    return [{k: (v if v != "" else None) for k, v in row.items()} for row in rows]


def _local_hf_dataset(seed_of):
    """inspect-ai 0.3.150's ``hf_dataset`` (dataset/_sources/hf.py) as gpqa_main calls it,
    ``load_dataset`` replaced by the fixture; the choices are shuffled by inspect's own
    ``MemoryDataset.shuffle_choices``, per sample, with ``seed_of(sample)``."""

    def hf_dataset(path, split, name=None, sample_fields=None, shuffle_choices=None, **kwargs):
        assert (path, name, split, shuffle_choices, kwargs) == (
            "Idavidrein/gpqa",
            "gpqa_main",
            "train",
            True,
            {},
        )
        dataset = support.memory_dataset(_records(), sample_fields, path)
        for sample in dataset.samples:
            MemoryDataset([sample]).shuffle_choices(seed=seed_of(sample))
        return dataset

    return hf_dataset


def _ours_seed(sample) -> str:
    # source.shuffled_choices' seed for this record
    return f"{gpqa_source.SHUFFLE_SEED}:{sample.id}"


def _task(seed_of):
    module = _ptb_module()
    return support.task_with_local_data(module, _local_hf_dataset(seed_of), module.gpqa_main)


@pytest.fixture(scope="module")
def task():
    return _task(_ours_seed)


@pytest.fixture(scope="module")
def ours():
    """Our test split, from the same file as prepare reads it."""
    return gpqa_source.parse_csv(CSV_FILE.read_bytes())


def _run(task, sample, completion: str = "ANSWER: A"):
    """(messages sent, generate kwargs, inspect's Score) for *sample* answered by *completion*."""
    sent = []
    generate = support.recording_generate(sent, reply=completion)

    async def go():
        state = await task.solver(support.task_state(sample), generate)
        return await task.scorer[0](state, Target(sample.target))

    score = asyncio.run(go())
    ((messages, kwargs),) = sent
    return messages, kwargs, score


def _as_ours(theirs) -> Sample:
    """Our sample holding inspect's (shuffled) choices and target."""
    return Sample(
        id=f"gpqa_{theirs.id}",
        category="",
        data={"question": theirs.input, "choices": list(theirs.choices), "answer": theirs.target},
    )


def test_every_sample_equals_inspects(task, ours):
    bench = get_benchmark("gpqamain")
    assert len(task.dataset) == len(ours) == 4
    for theirs, sample in zip(task.dataset, ours):
        messages, kwargs, _ = _run(task, theirs)
        mine = [(m["role"], m["content"]) for m in bench.build_messages(sample)]
        assert mine == messages, sample.id
        assert [role for role, _ in messages] == ["user"]
        assert kwargs == {"max_tokens": None}  # only PTB's eval(max_tokens=...) applies
        # record_to_sample's fields, and our seeded shuffle equals inspect's with that seed
        assert sample.id == f"gpqa_{theirs.id}"
        assert (theirs.input, list(theirs.choices), theirs.target) == (
            sample.data["question"],
            sample.data["choices"],
            sample.data["answer"],
        )
    assert task.config.model_dump(exclude_none=True) == {} and task.epochs == 1
    # the text reaches the prompt unchanged: leading spaces, "[title]", double spaces
    assert ours[0].data["question"].startswith("  Which particle")
    assert "[title]" in ours[2].data["question"] and "  " in ours[1].data["question"]


def test_a_random_order_gives_the_same_messages():
    """PostTrainBench's random shuffle: for whatever order it draws, ours (given that
    order) sends the same message."""
    rng = random.Random()
    task = _task(lambda _sample: rng.randrange(2**32))
    bench = get_benchmark("gpqamain")
    for theirs in task.dataset:
        messages, _, _ = _run(task, theirs)
        mine = [(m["role"], m["content"]) for m in bench.build_messages(_as_ours(theirs))]
        assert mine == messages


COMPLETIONS = [
    "Reasoning...\nANSWER: {L}",
    "ANSWER: {L}",
    "ANSWER: {L}.",
    "ANSWER: {L}..",
    "ANSWER:{L}",
    "ANSWER : {L}",
    "ANSWER:  {L}  .",
    "Answer: {L}",
    "answer: {L}",
    "ANSWER: {l}",  # lower-case letter: not an allowed option
    "ANSWER: ({L})",
    "ANSWER: {L})",
    "ANSWER: **{L}**",
    "**ANSWER: {L}**",
    "ANSWER: ${L}$",
    "FINAL ANSWER: {L}",
    "The final ANSWER: {L}",
    "So ANSWER: {L} is my choice",
    "ANSWER: {L}\nANSWER: {M}",  # the first strict match counts
    "ANSWER: {M}\nANSWER: {L}",
    "I first thought ANSWER: {M}, but\nANSWER: {L}",  # strict line beats earlier loose
    "ANSWER: {L}\n\nI hope this helps.",
    "ANSWER: {L} 2",
    "ANSWER: {L}, {M}",
    "ANSWER: {L} or {M}",
    "ANSWER: {L} and {M}",
    "ANSWER: {L}{M}",
    "ANSWER: E",
    "ANSWER: 2",
    "ANSWER:\n{L}",
    "ANSWER: {L}\u3002",
    "The answer is {L}.",
    "\\boxed{{{L}}}",
    "{L}",
    "I don't know.",
    "",
]


def _fill(template: str, letter: str) -> str:
    other = "ABCD"[("ABCD".index(letter) + 1) % 4]
    return template.format(L=letter, l=letter.lower(), M=other)


def test_scorer_equals_inspects_choice(task):
    bench = get_benchmark("gpqamain")
    outcomes, hedges, mismatches = set(), 0, []
    for theirs in task.dataset:
        sample = _as_ours(theirs)
        for template in COMPLETIONS:
            for letter in "ABCD":
                completion = _fill(template, letter)
                _, _, score = _run(task, theirs, completion)
                outcomes.add(score.value)
                result = bench.score(sample, completion)
                state = support.task_state(theirs, completion)
                inspect_letters = parse_answers(state, multiple_correct=False)
                got = parse_answer(completion)
                if inspect_letters != ({got} if got else set()):
                    mismatches.append((completion, got, inspect_letters))
                if letter_hedge(completion):
                    hedges += 1
                    if result.score != 0.0 or result.error_type != "hedged":
                        mismatches.append((completion, result, "hedge"))
                elif result.correct != (score.value == CORRECT):
                    mismatches.append((theirs.id, completion, result, score.value))
    assert not mismatches, mismatches[:10]
    assert outcomes == {CORRECT, INCORRECT}
    assert hedges == 4 * 4 * 3  # "{L}, {M}", "{L} or {M}", "{L} and {M}"


@pytest.mark.parametrize(
    "completion,letter",
    [
        ("ANSWER: B.", "B"),
        ("ANSWER: b", None),
        ("ANSWER: (B)", None),
        ("ANSWER: A\nOn reflection, ANSWER: B", "A"),  # the first strict match
        ("Maybe ANSWER: A, no:\nANSWER: B", "B"),
        ("The answer is B.", None),
        ("ANSWER: B 2", None),
        ("ANSWER: AB", None),  # exactly one letter
    ],
)
def test_inspect_parsing_kept(completion, letter):
    assert parse_answer(completion) == letter
