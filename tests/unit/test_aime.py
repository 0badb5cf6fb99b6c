"""AIME 2025 source (fixture files served as a local HF hub), prepare, prompt and scorer (host tier).

tests/task/test_aime_inspect_parity.py checks the prompt and scorer against inspect_evals itself.
"""

from __future__ import annotations

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.aime import source as aime_source
from posttrainbench.task.benchmarks.aime.benchmark import extract_answer, remove_boxed_from_ans
from posttrainbench.task.benchmarks.answers import (
    boxed_integer,
    last_boxed,
    last_integer,
    parse_integer,
)
from posttrainbench.task.benchmarks.base import Sample
from tests.helpers import REPO
from tests.http_fixture import serve_routes

FIXTURES = REPO / "tests" / "fixtures" / "aime"


def _hub_routes() -> dict[str, bytes]:
    s = aime_source
    return {
        f"/datasets/{s.TEST_REPO}/resolve/{s.TEST_REVISION}/{s.TEST_FILE}": (
            FIXTURES / "test.jsonl"
        ).read_bytes(),
        f"/datasets/{s.DEV_REPO}/resolve/{s.DEV_REVISION}/{s.DEV_FILE}": (
            FIXTURES / s.DEV_FILE
        ).read_bytes(),
    }


def test_prepare_from_local_hub(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import data_root, prepare_benchmark

    with serve_routes(_hub_routes()) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        manifest = prepare_benchmark("aime2025", tmp_path)
    assert (
        manifest.dev_source == "natural"
        and manifest.splits["test"].n == 4
        and manifest.splits["dev"].n == 3
    )
    monkeypatch.setenv("PTB_DATA_DIR", str(data_root(tmp_path)))
    bench = get_benchmark("aime2025")
    test, dev = bench.load("test"), bench.load("dev")
    assert [s.id for s in test] == ["aime2025_0", "aime2025_1", "aime2025_2", "aime2025_3"]
    assert [s.data["answer"] for s in test] == [9, 12, 820, 0]
    # dev: only the 2023-2024 exams, answers as integers ("032" -> 32), multi-line CSV fields kept
    assert [s.id for s in dev] == ["aime_2023-I-1", "aime_2023-II-2", "aime_2024-II-3"]
    assert [s.data["answer"] for s in dev] == [12, 204, 32] and "\n" in dev[1].data["problem"]
    assert {s.category for s in dev} == {"aime2023", "aime2024"}


def test_json_list_layout_and_bad_answers():
    body = b'[{"question": "Q1", "answer": 5}, {"problem": "Q2", "answer": "070"}]'
    samples = aime_source.parse_test(body)
    assert [(s.id, s.data["answer"]) for s in samples] == [("aime2025_0", 5), ("aime2025_1", 70)]
    with pytest.raises(ValueError, match="0..999"):
        aime_source.parse_test(b'{"problem": "Q", "answer": "1/2"}\n')
    with pytest.raises(ValueError, match="0..999"):
        aime_source.parse_test(b'{"problem": "Q", "answer": "1000"}\n')


def test_missing_file_is_a_clear_error(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import DataPrepareError, prepare_benchmark

    with serve_routes({}) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        with pytest.raises(DataPrepareError, match="aime2025: HTTP 404"):
            prepare_benchmark("aime2025", tmp_path)


# ---------- extraction ----------


def test_last_boxed_nested_and_truncated():
    assert last_boxed(r"\boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{ 7 } and finally \boxed{70") == " 7 "  # unclosed last box skipped
    assert last_boxed("no box") is None
    assert last_boxed(r"\fbox{12}") == "12"


@pytest.mark.parametrize(
    "text,value",
    [
        ("70", 70),
        (" 070 ", 70),
        ("$70$", 70),
        (r"\text{70}", 70),
        (r"70^\circ", 70),
        (r"70^{\circ}", 70),
        ("70.", 70),
        ("70.0", 70),
        ("1,000", 1000),
        (r"1{,}000", 1000),
        (r"\mathbf{204}", 204),
        (r"\frac{1}{2}", None),
        ("7.5", None),
        ("x=5", None),
        ("", None),
        ("12 or 13", None),
    ],
)
def test_parse_integer(text, value):
    assert parse_integer(text) == value


def test_last_integer():
    assert last_integer("so 3 + 4 = 7.") == 7
    assert last_integer("the answer is 1,000") == 1000
    assert last_integer("ratio 3.5") is None
    assert last_integer("value 12.00") == 12
    assert last_integer("none") is None


SAMPLE = Sample(
    id="aime2025_0", category="aime2025", data={"problem": "Find the remainder ...", "answer": 70}
)


@pytest.mark.parametrize(
    "completion",
    [
        "Reasoning...\nANSWER: 70",
        "ANSWER: 70.",
        "answer: $70$",
        r"Thus the answer is $\boxed{70}$.",
        r"First guess \boxed{16}. Re-checking, the sum is \boxed{070}.",
        "Adding up the bases 21 and 49 we get 70",  # inspect's match: the last number
        r"The sum is 70, boxed: \boxed{70",  # unclosed box: the last word ends with 70
        "ANSWER: 170",  # match(numeric=True) only checks the end
    ],
)
def test_right_outputs(completion):
    r = get_benchmark("aime2025").score(SAMPLE, completion)
    assert r.score == 1.0 and r.error_type is None, r


@pytest.mark.parametrize(
    "completion,error",
    [
        (r"\boxed{71}", "wrong_answer"),
        (r"I get \boxed{70} ... no wait, \boxed{16}.", "wrong_answer"),  # last word: \boxed{16
        (r"The answer is $\boxed{70}$, from 21 and 49.", "wrong_answer"),  # so does this 49
        ("ANSWER: 70\nCheck: 3 + 4 = 7", "wrong_answer"),
        (r"\boxed{\text{70}}", "wrong_answer"),  # "\text{70}" is not a number
        ("It is 70 or maybe 71", "hedged"),  # alternatives: a hedge, not an answer
        ("ANSWER: 68, 69, 70", "hedged"),
        ("I cannot solve this.", "no_answer"),
        ("", "no_answer"),
    ],
)
def test_wrong_outputs(completion, error):
    r = get_benchmark("aime2025").score(SAMPLE, completion)
    assert r.score == 0.0 and r.error_type == error, r


def test_remove_boxed_is_greedy_per_line():
    assert remove_boxed_from_ans(r"\boxed{1} and \boxed{2}") == r"1} and \boxed{2"
    assert remove_boxed_from_ans("\\boxed{1}\n\\boxed{2}") == "1\n2"
    assert remove_boxed_from_ans(r"\boxed{70") == r"\boxed{70"


def test_extract_answer_reports_method():
    assert extract_answer(r"\boxed{5}") == (5, "boxed")
    assert extract_answer("so 5") == (5, "last_integer")
    assert boxed_integer("no box") is None


def test_prompt_and_generation():
    bench = get_benchmark("aime2025")
    (msg,) = bench.build_messages(SAMPLE)
    assert msg == {
        "role": "user",
        "content": "Solve the following math problem step by step.\nThe last line of your "
        'response should be of the form "ANSWER: $ANSWER" (without quotes) where $ANSWER is '
        "the answer to the problem.\n\nFind the remainder ...\n\nRemember to put your "
        'answer on its own line at the end in the form "ANSWER: $ANSWER" (without quotes) '
        "where $ANSWER is the answer to the problem, and you do not need to use a \\boxed "
        "command.",
    }
    g = bench.generation
    assert (
        g.temperature == 0.6 and g.top_p == 0.95 and g.num_seeds == 4 and g.max_new_tokens >= 2048
    )
