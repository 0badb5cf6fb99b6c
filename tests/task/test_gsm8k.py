"""GSM8K parity with PostTrainBench's ``inspect_evals/gsm8k`` (task tier: needs
``inspect-ai`` and ``inspect-evals`` from tests/task/requirements-nodeps.txt).

inspect_evals' own ``gsm8k()`` task function is built with its ``hf_dataset`` pointed at
the local GSM8K files (../shared/data/gsm8k); its solvers (few-shot system message,
prompt template) run on every test sample and its scorer on a set of completions, and
each must equal what our :class:`Gsm8k` sends and decides.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.datafiles import read_split
from posttrainbench.task.benchmarks.gsm8k import inspect_match
from posttrainbench.task.benchmarks.gsm8k.benchmark import fewshot_records
from posttrainbench.task.benchmarks.gsm8k.extract import hedge
from posttrainbench.task.benchmarks.plugin import plugins
from tests.helpers import SHARED_DATA
from tests.task import inspect_support as support

pytest.importorskip("inspect_ai", reason="inspect-ai not installed (tests/task/requirements)")
gsm8k_module = pytest.importorskip(
    "inspect_evals.gsm8k.gsm8k", reason="inspect-evals not installed (tests/task/requirements)"
)
np = pytest.importorskip("numpy")

from inspect_ai.scorer import CORRECT, Target  # noqa: E402
from inspect_ai.scorer._common import normalize_number  # noqa: E402

GSM8K_DIR = SHARED_DATA / "gsm8k"
pytestmark = pytest.mark.skipif(
    not (GSM8K_DIR / "train.jsonl").is_file(), reason="no GSM8K data in ../shared/data"
)
# PostTrainBench src/eval/tasks/gsm8k/evaluate.py: --max-tokens' default, passed to
# inspect_ai.eval(max_tokens=...); it sets no other generation option.
PTB_MAX_TOKENS = 4000


def local_hf_dataset(
    path, split, sample_fields=None, data_dir=None, shuffle=False, seed=None, limit=None,
    auto_id=False, **kwargs,
):  # fmt: skip
    """inspect-ai 0.3.150's ``hf_dataset`` (dataset/_sources/hf.py) with ``load_dataset``
    replaced by the local file: ``Dataset.shuffle(seed)`` of datasets (4.5.0 in
    PostTrainBench's image, arrow_dataset.py) is ``select(default_rng(seed).permutation(n))``,
    then ``select(range(limit))``, then inspect's own record-to-sample conversion."""
    assert (path, data_dir, kwargs) == ("openai/gsm8k", "main", {})
    records = support.read_jsonl(GSM8K_DIR / f"{split}.jsonl")
    if shuffle:
        records = [records[i] for i in np.random.default_rng(seed).permutation(len(records))]
    if limit:
        records = records[:limit]
    return support.memory_dataset(records, sample_fields, path, auto_id)


@pytest.fixture(scope="module")
def task():
    return support.task_with_local_data(gsm8k_module, local_hf_dataset, gsm8k_module.gsm8k)


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Our test split, prepared from the same files the way ``ptb data import`` does."""
    from posttrainbench.host.data.importer import import_benchmark
    from posttrainbench.host.data.prepare import data_root

    cache = tmp_path_factory.mktemp("cache")
    import_benchmark("gsm8k", GSM8K_DIR, cache)
    return read_split("gsm8k", "test", data_root(cache))


@pytest.fixture(scope="module")
def inspect_sent(task):
    """(messages, generate kwargs) that inspect's solver chain sends for each test sample."""
    return support.solver_sends(task)


def test_fewshot_file_is_inspects_selection():
    train = (GSM8K_DIR / "train.jsonl").read_text(encoding="utf-8").splitlines()
    picked = np.random.default_rng(42).permutation(len(train))[:10].tolist()
    records = fewshot_records()
    assert [r["train_index"] for r in records] == picked
    for r in records:
        row = json.loads(train[r["train_index"]])
        assert (r["question"], r["answer"]) == (row["question"], row["answer"])


def test_every_sample_equals_inspects(task, ours, inspect_sent):
    bench = get_benchmark("gsm8k")
    assert len(task.dataset) == len(ours) == len(inspect_sent) == 1319
    mismatches = []
    for theirs, (messages, _), sample in zip(task.dataset, inspect_sent, ours):
        mine = [(m["role"], m["content"]) for m in bench.build_messages(sample)]
        if mine != messages:
            mismatches.append((sample.id, "messages"))
        if (theirs.input, theirs.target) != (sample.data["question"], bench.target(sample)):
            mismatches.append((sample.id, "input/target"))
    assert not mismatches, mismatches[:10]
    roles = [role for role, _ in inspect_sent[0][0]]
    assert roles == ["system", "user"]
    assert inspect_sent[0][0][0][1].count("\n\nANSWER: ") == 10  # the 10 few-shot examples


def test_generation_settings_equal_ptbs(task, inspect_sent):
    # The task adds no generation config of its own: PTB's eval(max_tokens=4000) is all.
    assert {json.dumps(kw, sort_keys=True) for _, kw in inspect_sent} == {'{"tool_calls": "loop"}'}
    assert task.config.model_dump(exclude_none=True) == {}
    # PostTrainBench's cap is the posttrainbench variant's first (plugin.json); the
    # benchmark's own small cap is the smoke variant's.
    assert plugins()["gsm8k"].command_line.token_ladder == [PTB_MAX_TOKENS, 3000, 2000]
    generation = get_benchmark("gsm8k").generation
    assert generation.max_new_tokens == 512 and generation.stop == ()


TARGETS = ["18", "2,125", "-3", "-10", "0", "5", "3", "1000", "114,200", "12", "7", "160"]
COMPLETIONS = [
    "ANSWER: 18",
    "ANSWER: 18.",
    "ANSWER: $18",
    "ANSWER: $18.00",
    "ANSWER: 18.0",
    "ANSWER: 18.5",
    "ANSWER: 118",  # inspect's numeric match ends with the target: right for 18
    "ANSWER: 1,000",
    "ANSWER: 1000.",
    "ANSWER: $1,000.00",
    "ANSWER: 2,125",
    "ANSWER: 2125",
    "ANSWER: $2,125.",
    "ANSWER: 114,200",
    "ANSWER: 114200",
    "ANSWER: -3",
    "ANSWER: 3",
    "ANSWER: -3.",
    "ANSWER: −3",  # a Unicode minus
    "ANSWER: -10",
    "ANSWER: 10",
    "ANSWER: 110",
    "ANSWER: 0",
    "ANSWER: 0.0",
    "ANSWER: 5 dollars",
    "ANSWER: 5 dollars.",
    "ANSWER: 5%",
    "ANSWER: **5**",
    "ANSWER: \\boxed{5}",
    "ANSWER: 5\n\nI hope this helps!",
    "ANSWER: 5\nQuestion: what is 7 + 12?",  # numbers after the answer line
    "ANSWER: 5\n(3 pens)",
    "So she has 18 eggs.\nANSWER:",
    "So she has 18 eggs.",  # "ANSWER:" missing: the last number still counts
    "The answer is 18",
    "I don't know.",
    "",
    "   ",
    "ANSWER: twelve",
    "ANSWER: 12 apples and 7 pears",
    "ANSWER: 7,",
    "ANSWER: 160 km/h",
    "ANSWER: 1.6e2",
    "ANSWER: 1_000",
    "ANSWER: 1000\n",
    "ANSWER: 5,000,000",
    "ANSWER: 12.",
    "ANSWER: 12..",
    "ANSWER: .5",
    "ANSWER: 5½",
    "ANSWER: ½",
    "ANSWER: 2²",
    "ANSWER: 十八",
    "ANSWER: 一百六十",
    "ANSWER: ١٨",  # Arabic-Indic digits
    "ANSWER: １８",  # fullwidth digits
    "ANSWER: Ⅻ",
    "ANSWER: ½½",  # inspect's scorer raises here
    "answer: 18",
    "#### 18",
    "18 + 0 = 18\n#### 18",
    "ANSWER: 18\nANSWER: 20",
    "ANSWER: 20\nANSWER: 18",
]


def _inspect_verdict(task, target: str, completion: str) -> tuple[str, str] | None:
    """inspect's (value, answer) for *completion*, or None where its scorer raises."""
    sample = next(iter(task.dataset))
    state = support.task_state(sample, completion)
    (scorer,) = task.scorer
    try:
        score = asyncio.run(scorer(state, Target(target)))
    except (ValueError, OverflowError):
        return None
    return score.value, score.answer


def _pairs() -> list[tuple[str, str]]:
    pairs = [(t, c) for t in TARGETS for c in COMPLETIONS]
    # and every test item's own target, answered plainly, with separators and wrongly
    for line in (GSM8K_DIR / "test.jsonl").read_text(encoding="utf-8").splitlines():
        target = json.loads(line)["answer"].split("####")[-1].strip()
        plain = target.replace(",", "")
        pairs += [
            (target, f"Reasoning...\n\nANSWER: {target}"),
            (target, f"Reasoning...\nANSWER: {plain}"),
            (target, f"Reasoning...\nANSWER: ${plain}.00."),
            (target, f"ANSWER: {int(float(plain)) + 1}"),
        ]
    return pairs


def test_scorer_equals_inspects_match(task):
    bench = get_benchmark("gsm8k")
    from posttrainbench.task.benchmarks.base import Sample

    outcomes, mismatches = set(), []
    for target, completion in _pairs():
        expected = _inspect_verdict(task, target, completion)
        sample = Sample("x", "gsm8k", {"question": "q", "answer": f"r\n#### {target}"})
        result = bench.score(sample, completion)
        if expected is None:  # inspect's scorer fails: ours scores 0 and says why
            outcomes.add("error")
            if result.score != 0.0 or "inspect's match fails" not in result.detail:
                mismatches.append((target, completion, result, "inspect raises"))
            continue
        answer, matched = inspect_match.match_end(completion, target)
        outcomes.add(expected[0])
        if (CORRECT if matched else "I", answer) != expected:
            mismatches.append((target, completion, (matched, answer), expected))
        if hedge(completion) is None and result.correct != (expected[0] == CORRECT):
            mismatches.append((target, completion, result, expected))
    assert not mismatches, mismatches[:10]
    assert outcomes == {CORRECT, "I", "error"}


def test_number_normalisation_equals_inspects():
    """normalize_number (its Unicode fallback too) on random numeric words."""
    numeric = [chr(i) for i in range(sys.maxunicode + 1) if chr(i).isnumeric()]
    alphabet = numeric + list("0123456789.") * 40 + list("十百千万零一二两兩廿½¼²³")
    rng = random.Random(0)
    words = numeric + ["".join(rng.choices(alphabet, k=rng.randint(1, 6))) for _ in range(20000)]

    def outcome(fn, word):
        try:
            return fn(word)
        except (ValueError, OverflowError):
            return "raises"

    mismatches = [
        w
        for w in words
        if w.replace(".", "").isnumeric()
        and outcome(inspect_match.normalize_number, w) != outcome(normalize_number, w)
    ]
    assert not mismatches, mismatches[:10]
