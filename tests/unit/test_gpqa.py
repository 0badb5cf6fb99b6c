"""GPQA main source (fixture CSVs served as a local gated HF hub), shuffling, prompt and scorer."""

from __future__ import annotations

import collections
import csv
import io

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.answers import extract_letter
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.gpqa import source as gpqa_source
from posttrainbench.task.benchmarks.gpqa.benchmark import parse_answer
from posttrainbench.task.benchmarks.gpqa.source import hf_text, parse_csv, shuffled_choices
from tests.helpers import REPO
from tests.http_fixture import serve_routes

FIXTURES = REPO / "tests" / "fixtures" / "gpqa"
TOKEN = "hf_fixture_token"
PINNED = (["c", "i2", "i3", "i1"], "A")


def _routes() -> dict[str, bytes]:
    return {
        f"/datasets/{gpqa_source.REPO}/resolve/main/{name}": (FIXTURES / name).read_bytes()
        for name in (gpqa_source.TEST_FILE, gpqa_source.DEV_FILE)
    }


def test_prepare_from_local_gated_hub(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import data_root, prepare_benchmark

    with serve_routes(_routes(), token=TOKEN) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        manifest = prepare_benchmark("gpqamain", tmp_path)
    assert (
        manifest.dev_source == "natural"
        and manifest.splits["test"].n == 4
        and manifest.splits["dev"].n == 2
    )
    monkeypatch.setenv("PTB_DATA_DIR", str(data_root(tmp_path)))
    bench = get_benchmark("gpqamain")
    test, dev = bench.load("test"), bench.load("dev")
    assert [s.id for s in test] == [f"gpqa_recFixture0000{i}" for i in (1, 2, 3, 4)]
    assert [s.id for s in dev] == [
        "gpqa_recFixture00005",
        "gpqa_recFixture00006",
    ]  # extended minus main
    assert [s.category for s in test] == ["Physics", "Chemistry", "Biology", "Physics"]
    first = test[0]
    # the text as the CSV holds it: inspect's record_to_sample does no cleanup
    assert first.data["question"] == "  Which particle is a fermion?\n(made up) "
    assert first.data["choices"][ord(first.data["answer"]) - 65] == "Electron"
    assert sorted(first.data["choices"]) == sorted(["Electron", "Photon", "Gluon", "Higgs boson"])
    assert test[1].data["question"] == "Which  compound is an alkane?"  # double space kept
    assert test[2].data["question"].endswith("adenine in DNA? [title] Base pairing")
    assert test[3].data["choices"].count("Simultaneity, in general") == 1  # quoted commas survive
    assert test[0].data["subdomain"] == "Quantum Mechanics"


def test_gated_without_token_is_a_clear_error(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import DataPrepareError, prepare_benchmark

    with serve_routes(_routes(), token=TOKEN) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        with pytest.raises(DataPrepareError, match="HTTP 401.*HF_TOKEN"):
            prepare_benchmark("gpqamain", tmp_path)


def test_missing_columns_rejected():
    with pytest.raises(ValueError, match="Record ID"):
        parse_csv(
            b"Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3\nq,a,b,c,d\n"
        )


# ---------- shuffling ----------


def test_shuffle_is_deterministic_and_order_independent():
    body = (FIXTURES / "gpqa_main.csv").read_bytes()
    once = {s.id: (s.data["choices"], s.data["answer"]) for s in parse_csv(body)}
    again = {s.id: (s.data["choices"], s.data["answer"]) for s in parse_csv(body)}
    assert once == again
    # the same record alone (as with --limit, or in another file order) shuffles identically
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    for row in reversed(rows):
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
        (alone,) = parse_csv(out.getvalue().encode())
        assert (alone.data["choices"], alone.data["answer"]) == once[alone.id]
    # pinned values: a change of seed or shuffling algorithm (which would reorder every
    # question of the benchmark) fails here
    assert shuffled_choices("recFixture00001", "c", ["i1", "i2", "i3"]) == PINNED


def test_shuffle_is_balanced_and_a_permutation():
    counts: collections.Counter[str] = collections.Counter()
    for i in range(2000):
        choices, letter = shuffled_choices(f"rec{i:08d}", "right", ["w1", "w2", "w3"])
        assert (
            sorted(choices) == ["right", "w1", "w2", "w3"]
            and choices["ABCD".index(letter)] == "right"
        )
        counts[letter] += 1
    assert set(counts) == set("ABCD") and all(400 <= n <= 600 for n in counts.values()), counts


def test_shuffle_depends_on_record_id():
    orders = {tuple(shuffled_choices(f"rec{i}", "c", ["a", "b", "d"])[0]) for i in range(50)}
    assert len(orders) > 10


def test_hf_text_is_str_of_what_datasets_reads():
    # pandas' read_csv (under datasets' CSV builder) reads these cells as NA -> None
    assert [hf_text(v) for v in ("", "NA", "n/a", "None", None)] == ["None"] * 5
    assert hf_text("  a  b [title] c ") == "  a  b [title] c "


# ---------- extraction and scoring ----------


@pytest.mark.parametrize(
    "text,letter",
    [
        ("Reasoning...\nANSWER: B", "B"),
        ("ANSWER: B.", "B"),
        ("ANSWER:B", "B"),
        ("answer: C", "C"),  # the keyword in any case
        ("Answer: c", None),  # the letter in upper case only
        ("**Answer:** (C)", None),  # no letter right after "ANSWER:"
        ("ANSWER: (B)", None),
        ("Answer: $A$", None),
        ("ANSWER: A\nOn reflection, ANSWER: C", "A"),  # the first line-start match
        ("I guess ANSWER: A here.\nANSWER: C", "C"),  # a line-start match beats a loose one
        ("So ANSWER: D it is", None),  # "D it is" is not one letter
        ("Then ANSWER: D. Done", "D"),
        ("ANSWER: AB", None),
        ("ANSWER: A, B", None),
        ("ANSWER: E", None),
        ("The answer is (B).", None),
        ("Hence \\boxed{D}", None),
        ("Long reasoning.\n\n(B)", None),
        ("", None),
    ],
)
def test_parse_answer_is_inspects(text, letter):
    assert parse_answer(text) == letter


def test_extract_letter_control_unchanged():
    # answers.extract_letter is no longer the GPQA rule; tests/security uses it as a control
    assert extract_letter("The answer is (B).") == "B"


SAMPLE = Sample(
    id="gpqa_rec1",
    category="Physics",
    data={
        "question": "Which particle is a fermion?",
        "choices": ["Photon", "Electron", "Gluon", "Higgs boson"],
        "answer": "B",
        "subdomain": "Quantum Mechanics",
        "record_id": "rec1",
    },
)


@pytest.mark.parametrize(
    "completion",
    [
        "Electrons have spin 1/2, so they are fermions.\nANSWER: B",
        "ANSWER: B.",
        "Photons are bosons (A is wrong).\nanswer: B",
    ],
)
def test_right_outputs(completion):
    r = get_benchmark("gpqamain").score(SAMPLE, completion)
    assert r.score == 1.0 and r.error_type is None, r


@pytest.mark.parametrize(
    "completion,error",
    [
        ("ANSWER: A", "wrong_answer"),
        ("Electron, i.e. B... final ANSWER: C", "wrong_answer"),
        ("ANSWER: A\nOn reflection, ANSWER: B", "wrong_answer"),  # inspect reads the first
        ("It is the electron.", "no_answer"),
        ("The answer is B.", "no_answer"),  # not the requested format
        ("ANSWER: b", "no_answer"),
        ("ANSWER: (B)", "no_answer"),
        ("ANSWER: B or C", "hedged"),
    ],
)
def test_wrong_outputs(completion, error):
    r = get_benchmark("gpqamain").score(SAMPLE, completion)
    assert r.score == 0.0 and r.error_type == error, r


def test_prompt_and_generation():
    bench = get_benchmark("gpqamain")
    (msg,) = bench.build_messages(SAMPLE)
    assert msg == {
        "role": "user",
        "content": "Answer the following multiple choice question. The last line of your "
        "response should be of the following format: 'ANSWER: $LETTER' (without quotes) "
        "where LETTER is one of A,B,C,D. Think step by step before answering.\n\n"
        "Which particle is a fermion?\n\nA) Photon\nB) Electron\nC) Gluon\nD) Higgs boson",
    }
    assert bench.generation.temperature == 0.0 and bench.generation.max_new_tokens >= 512
