"""GSM8K source (real data: imported from ../shared/data, and downloaded from a local HTTP
server for the download path itself), prepare, prompt and scorer (host tier)."""

from __future__ import annotations

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.datafiles import read_split
from posttrainbench.task.benchmarks.gsm8k.benchmark import (
    FEWSHOT_COUNT,
    MATH_PROMPT_TEMPLATE,
    fewshot_records,
    split_answer,
    system_prompt,
)
from posttrainbench.task.benchmarks.gsm8k.extract import flexible_extract, normalize, strict_extract
from posttrainbench.task.benchmarks.gsm8k.inspect_match import match_end, normalize_number
from posttrainbench.task.benchmarks.gsm8k.source import Gsm8kSource, target_of
from posttrainbench.task.benchmarks.plugin import plugins
from tests.helpers import SHARED_DATA
from tests.http_fixture import serve_dir

GSM8K_DIR = SHARED_DATA / "gsm8k"
needs_data = pytest.mark.skipif(
    not (GSM8K_DIR / "test.jsonl").is_file(), reason="no GSM8K data in shared/data"
)


@pytest.fixture(scope="module")
def real_splits(tmp_path_factory):
    from posttrainbench.host.data.importer import import_benchmark
    from posttrainbench.host.data.prepare import data_root

    cache = tmp_path_factory.mktemp("cache")
    import_benchmark("gsm8k", GSM8K_DIR, cache)
    return {split: read_split("gsm8k", split, data_root(cache)) for split in ("test", "dev")}


@needs_data
def test_real_source_splits(real_splits):
    test, dev = real_splits["test"], real_splits["dev"]
    assert len(test) == 1319 and len(dev) == 250
    assert [s.id for s in test[:2]] == ["gsm8k_test_0", "gsm8k_test_1"]
    assert test[0].data["question"].startswith("Janet") and test[0].data["target"] == "18"
    assert dev[0].id == "gsm8k_train_7223" and dev[-1].id == "gsm8k_train_7472"
    assert not {s.data["question"] for s in test} & {s.data["question"] for s in dev}
    for s in test + dev:  # every target is a number; inspect's target keeps its commas
        float(s.data["target"])
        assert split_answer(s.data["answer"])[0].replace(",", "") == s.data["target"]


@needs_data
def test_fewshot_examples_are_train_items_outside_dev(real_splits):
    """The stored few-shot items are rows of train.jsonl (tests/task/test_gsm8k.py checks
    they are inspect's selection), none of them a dev or test question."""
    import json

    train = (GSM8K_DIR / "train.jsonl").read_text(encoding="utf-8").splitlines()
    records = fewshot_records()
    assert len(records) == FEWSHOT_COUNT
    for r in records:
        row = json.loads(train[r["train_index"]])
        assert (row["question"], row["answer"]) == (r["question"], r["answer"])
    questions = {r["question"] for r in records}
    assert not questions & {s.data["question"] for s in real_splits["test"] + real_splits["dev"]}


@needs_data
def test_gold_answers_score_right_and_shifted_ones_wrong(real_splits):
    bench = get_benchmark("gsm8k")
    test = real_splits["test"]
    for i, s in enumerate(test):
        target = split_answer(s.data["answer"])[0]
        assert bench.score(s, s.data["answer"]).score == 1.0, s.id
        assert bench.score(s, f"Reasoning...\n\nANSWER: {target}").score == 1.0, s.id
        other = split_answer(test[(i + 1) % len(test)].data["answer"])[0]
        plain = normalize_number(other.replace(",", ""))
        if not plain.endswith(target.lstrip("-")):  # inspect matches the end of the number
            assert bench.score(s, f"reasoning...\nANSWER: {other}").score == 0.0, s.id


@needs_data
def test_prepare_end_to_end(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import data_root, prepare_benchmark

    with serve_dir(GSM8K_DIR) as url:
        monkeypatch.setattr(Gsm8kSource, "BASE_URL", url)
        manifest = prepare_benchmark("gsm8k", tmp_path)
    root = data_root(tmp_path) / "gsm8k"
    assert {p.name for p in root.iterdir()} == {"test.jsonl", "dev.jsonl", "manifest.json"}
    assert manifest.dev_source == "natural" and not manifest.carved_dev_ids
    assert manifest.splits["test"].n == 1319 and manifest.splits["dev"].n == 250
    assert url in manifest.provenance
    monkeypatch.setenv("PTB_DATA_DIR", str(data_root(tmp_path)))
    assert [s.id for s in get_benchmark("gsm8k").load("test", limit=3)] == [
        "gsm8k_test_0",
        "gsm8k_test_1",
        "gsm8k_test_2",
    ]
    assert len(read_split("gsm8k", "dev")) == 250


def test_unreachable_source_is_a_clear_error(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import DataPrepareError, prepare_benchmark

    with serve_dir(tmp_path) as url:  # an empty directory: 404 for both files
        monkeypatch.setattr(Gsm8kSource, "BASE_URL", url)
        with pytest.raises(DataPrepareError, match="HTTP 404"):
            prepare_benchmark("gsm8k", tmp_path / "cache")


SAMPLE = Sample(
    id="gsm8k_test_x",
    category="gsm8k",
    data={
        "question": "A shop sells 600 pens at $4 each. How much money does it make?",
        "answer": "It makes 600 * 4 = $<<600*4=2400>>2400.\n#### 2400",
        "target": "2400",
    },
)
COMMA = Sample(  # a target written with a thousands separator is matched as text
    id="gsm8k_test_z",
    category="gsm8k",
    data={
        "question": "A shop sells 1,200 pens at $2 each. How much money does it make?",
        "answer": "It makes 1200 * 2 = $<<1200*2=2400>>2,400.\n#### 2,400",
        "target": "2400",
    },
)
NEG = Sample(
    id="gsm8k_test_y",
    category="gsm8k",
    data={
        "question": "q",
        "answer": "It drops 5 - 8 = <<5-8=-3>>-3 degrees.\n#### -3",
        "target": "-3",
    },
)


@pytest.mark.parametrize(
    "completion",
    [
        "600 * 4 = 2400\nANSWER: 2400",
        "The shop makes $2,400.",
        "600 x 4 = 2,400\n#### 2,400",
        "It makes 2400 dollars. So the answer is 2400.",
        "ANSWER: 2400.0",
        "ANSWER: 12400",  # inspect's numeric match: the number ends with the target
        "ANSWER: 100\nWait, that's wrong: 600 * 4 = 2400.\nANSWER: 2400",  # the last counts
    ],
)
def test_right_outputs(completion):
    r = get_benchmark("gsm8k").score(SAMPLE, completion)
    assert r.score == 1.0 and r.error_type is None, r


@pytest.mark.parametrize(
    "completion,error",
    [
        ("ANSWER: 2400\nThat is 2400 pens times 2 dollars, 1 for each.", "wrong_answer"),
        ("600 * 4 = 2400\nANSWER: 240", "wrong_answer"),
        ("The answer is 2400.5", "wrong_answer"),
        ("I don't know.", "no_answer"),
        ("", "no_answer"),
        ("ANSWER: ½½", "no_answer"),  # inspect's scorer raises: 0, never an error
    ],
)
def test_wrong_outputs(completion, error):
    r = get_benchmark("gsm8k").score(SAMPLE, completion)
    assert r.score == 0.0 and r.error_type == error, r


def test_text_targets_and_detail():
    bench = get_benchmark("gsm8k")
    assert bench.score(COMMA, "ANSWER: 2,400").score == 1.0
    assert bench.score(COMMA, "ANSWER: $2,400.").score == 1.0
    assert bench.score(COMMA, "ANSWER: 2400").score == 0.0  # as inspect: text must end "2,400"
    assert bench.score(NEG, "So the temperature is -3.").score == 1.0
    assert bench.score(NEG, "So the temperature is 3.").score == 1.0  # inspect strips the "-"
    assert bench.score(NEG, "So the temperature is 4.").score == 0.0
    r = bench.score(SAMPLE, "ANSWER: 2400\nSo 7.")
    assert r.score == 0.0 and "answer='7'" in r.detail and "target='2400'" in r.detail


def test_inspect_match_rules():
    assert match_end("ANSWER: $1,000.", "1000") == ("1000", True)
    assert match_end("x 18 y", "18") == ("18", True)  # the last number, wherever it is
    assert match_end("no number here", "5") == ("here", False)  # else the last word
    assert normalize_number("1234567") == "1.2346e+06" and normalize_number("5.0") == "5"
    assert normalize_number("十八") == "18" and normalize_number("2½") == "2.5"


def test_filters():
    assert strict_extract("#### 5\n#### 6") == "5"
    assert flexible_extract("#### 5\n#### 6") == "6"
    assert flexible_extract("costs $1,000.") == "$1,000."
    assert strict_extract("no marker 5") == "[invalid]" and flexible_extract("none") == "[invalid]"
    assert normalize("$1,000.") == "1000" and normalize("Solution...\n#### 72") == "72"


def test_answer_line_hedges():
    bench = get_benchmark("gsm8k")
    for completion in ("ANSWER: 2399 or 2400", "answer: 2398, 2399, 2400"):
        r = bench.score(SAMPLE, completion)
        assert r.score == 0.0 and r.error_type == "hedged", r
    assert bench.score(SAMPLE, "ANSWER: 600 * 4 = 2400").score == 1.0  # arithmetic: no hedge


def test_target_and_prompt():
    assert target_of("x\n#### 1,234") == "1234"
    assert split_answer("a\n#### b\n#### 1,234") == ("1,234", "a\n#### b")
    with pytest.raises(ValueError):
        target_of("no marker")
    bench = get_benchmark("gsm8k")
    system, user = bench.build_messages(SAMPLE)
    assert system == {"role": "system", "content": system_prompt()}
    assert system["content"].count("\n\nReasoning:\n") == FEWSHOT_COUNT
    assert system["content"].count("\n\nANSWER: ") == FEWSHOT_COUNT
    assert user == {
        "role": "user",
        "content": MATH_PROMPT_TEMPLATE.format(prompt=SAMPLE.data["question"]),
    }
    assert user["content"].endswith(SAMPLE.data["question"] + "\n\nRemember to put your answer"
        ' on its own line at the end in the form "ANSWER: $ANSWER" (without quotes) where'
        " $ANSWER is the answer to the problem, and you do not need to use a \\boxed"
        " command.\n\nReasoning:")  # fmt: skip
    assert "$<<" not in user["content"]  # the solution is never in the prompt
    # The smoke variant's cap; PostTrainBench's 4000 is the posttrainbench variant's.
    assert bench.generation.max_new_tokens == 512
    assert plugins()["gsm8k"].command_line.max_tokens == 4000
    assert bench.generation.temperature == 0.0 and bench.generation.num_seeds == 1
