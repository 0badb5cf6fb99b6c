"""GSM8K source (real data: imported from ../shared/data, and downloaded from a local HTTP
server for the download path itself), prepare, prompt and scorer (host tier)."""

from __future__ import annotations

import pytest

from posttrainbench.benchmarks import get_benchmark
from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.datafiles import read_split
from posttrainbench.benchmarks.gsm8k.extract import flexible_extract, normalize, strict_extract
from posttrainbench.benchmarks.gsm8k.source import Gsm8kSource, target_of
from tests.helpers import SHARED_DATA
from tests.http_fixture import serve_dir

GSM8K_DIR = SHARED_DATA / "gsm8k"
needs_data = pytest.mark.skipif(
    not (GSM8K_DIR / "test.jsonl").is_file(), reason="no GSM8K data in shared/data"
)


@pytest.fixture(scope="module")
def real_splits(tmp_path_factory):
    from posttrainbench.data.importer import import_benchmark
    from posttrainbench.data.prepare import data_root

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
    for s in (
        test + dev
    ):  # every target is a plain number that the scorer's normalisation agrees with
        float(s.data["target"])
        assert normalize(s.data["answer"]) == s.data["target"].lower()


@needs_data
def test_gold_answers_score_right_and_shifted_ones_wrong(real_splits):
    bench = get_benchmark("gsm8k")
    test = real_splits["test"]
    for i, s in enumerate(test):
        assert bench.score(s, s.data["answer"]).score == 1.0, s.id
        other = test[(i + 1) % len(test)].data["target"]
        if other != s.data["target"]:
            assert bench.score(s, f"reasoning...\n#### {other}").score == 0.0, s.id


@needs_data
def test_prepare_end_to_end(tmp_path, monkeypatch):
    from posttrainbench.data.prepare import data_root, prepare_benchmark

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
    from posttrainbench.data.prepare import DataPrepareError, prepare_benchmark

    with serve_dir(tmp_path) as url:  # an empty directory: 404 for both files
        monkeypatch.setattr(Gsm8kSource, "BASE_URL", url)
        with pytest.raises(DataPrepareError, match="HTTP 404"):
            prepare_benchmark("gsm8k", tmp_path / "cache")


SAMPLE = Sample(
    id="gsm8k_test_x",
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
        "1200 * 2 = 2400\n#### 2400",
        "The shop makes $2,400.",
        "1200 x 2 = 2,400\n#### 2,400",
        "It makes 2400 dollars. So the answer is 2400.",
        "#### 100\nWait, that's wrong: 1200 * 2 = 2400. #### 2400",  # flexible takes the last number
    ],
)
def test_right_outputs(completion):
    r = get_benchmark("gsm8k").score(SAMPLE, completion)
    assert r.score == 1.0 and r.error_type is None, r


@pytest.mark.parametrize(
    "completion,error",
    [
        (
            "#### 2400\nThat is 2400 pens times 2 dollars, 1 for each.",
            "wrong_answer",
        ),  # last number is 1
        ("1200 * 2 = 2400\n#### 240", "wrong_answer"),
        ("The answer is 2400.5", "wrong_answer"),
        ("I don't know.", "no_answer"),
        ("", "no_answer"),
    ],
)
def test_wrong_outputs(completion, error):
    r = get_benchmark("gsm8k").score(SAMPLE, completion)
    assert r.score == 0.0 and r.error_type == error, r


def test_negative_and_detail():
    bench = get_benchmark("gsm8k")
    assert bench.score(NEG, "So the temperature is -3.").score == 1.0
    assert bench.score(NEG, "So the temperature is 3.").score == 0.0
    r = bench.score(
        SAMPLE, "#### 2400\nSo 7."
    )  # strict right, flexible wrong: flexible is the score
    assert (
        r.score == 0.0
        and "strict-match='2400' (right)" in r.detail
        and "flexible-extract='7.' (wrong)" in r.detail
    )


def test_filters():
    assert strict_extract("#### 5\n#### 6") == "5"
    assert flexible_extract("#### 5\n#### 6") == "6"
    assert flexible_extract("costs $1,000.") == "$1,000."
    assert strict_extract("no marker 5") == "[invalid]" and flexible_extract("none") == "[invalid]"
    assert normalize("$1,000.") == "1000" and normalize("Solution...\n#### 72") == "72"


def test_target_and_prompt():
    assert target_of("x\n#### 1,234") == "1234"
    with pytest.raises(ValueError):
        target_of("no marker")
    bench = get_benchmark("gsm8k")
    (msg,) = bench.build_messages(SAMPLE)
    assert (
        msg["role"] == "user"
        and SAMPLE.data["question"] in msg["content"]
        and "####" in msg["content"]
    )
    assert "$<<" not in msg["content"]  # the solution is never in the prompt
    assert bench.generation.temperature == 0.0 and bench.generation.num_seeds == 1
