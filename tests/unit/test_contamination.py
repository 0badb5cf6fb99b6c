"""The contamination checker: planted positives, clean negatives, parity with the naive checker."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from posttrainbench.task.integrity.contamination.check import check_inputs
from posttrainbench.task.integrity.contamination.naive import naive_check
from posttrainbench.task.integrity.contamination.reference import (
    ReferenceItem,
    load_reference,
    write_reference,
)
from tests.helpers import SHARED_DATA, run_ptb

GSM8K = SHARED_DATA / "gsm8k"
pytestmark = pytest.mark.skipif(
    not (GSM8K / "test.jsonl").exists(), reason="needs ../shared/data/gsm8k"
)


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (GSM8K / name).read_text().splitlines()]


@pytest.fixture(scope="module")
def reference() -> list[ReferenceItem]:
    return [
        ReferenceItem(question=r["question"], answer=r["answer"]) for r in _rows("test.jsonl")[:60]
    ]


def _chat(question: str, answer: str) -> str:
    return json.dumps(
        {
            "messages": [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]
        }
    )


def _keys(report) -> list[tuple[str, str, int]]:
    return sorted((m.source, m.locator, m.test_index) for m in report.matches)


def test_planted_test_questions_are_flagged_with_their_test_items(tmp_path, reference):
    train = [json.dumps(r) for r in _rows("train.jsonl")[:300]]
    for line, item in ((10, 3), (150, 41), (299, 59)):
        train.insert(line, _chat(reference[item].question, reference[item].answer))
    path = tmp_path / "sft.jsonl"
    path.write_text("\n".join(train) + "\n")
    report = check_inputs(reference, [path], workers=1)
    assert report.contaminated
    assert _keys(report) == [
        (str(path), "line 11", 3),
        (str(path), "line 151", 41),
        (str(path), "line 300", 59),
    ]
    assert report.contaminated_test_items == [3, 41, 59]
    assert all(m.score > 0.9 for m in report.matches)


def test_the_benchmarks_own_train_split_is_clean(reference):
    # 7473 real GSM8K training problems share style and vocabulary with the test set.
    report = check_inputs(reference, [GSM8K / "train.jsonl"])
    assert not report.contaminated, report.matches[:3]
    assert report.n_records == 7473


def _write_arrow_files(parquet, arrow, texts: list[str]) -> None:
    # In a child process: pyarrow starts threads, and the checker forks its workers.
    code = (
        "import sys, json, pyarrow as pa, pyarrow.parquet as pq; t = pa.table({'text': json.loads(sys.argv[3])}); "
        "pq.write_table(t, sys.argv[1]); w = pa.ipc.new_stream(sys.argv[2], t.schema); w.write_table(t); w.close()"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(parquet), str(arrow), json.dumps(texts)], check=True
    )


def test_fast_checker_equals_naive_checker_across_formats(tmp_path, reference):
    rng = random.Random(0)
    train = _rows("train.jsonl")[:400]
    lines = [json.dumps(r) for r in train]
    expected_hit = set()
    for k, item in enumerate(range(0, 60, 4)):
        q, a = reference[item].question, reference[item].answer
        words = q.split()
        variants = [
            json.dumps({"text": q.upper()}),
            json.dumps({"text": "\n  \t".join(words)}, ensure_ascii=True),
            json.dumps({"prompt": f"Solve this: {q}", "completion": a}),
            json.dumps({"text": " ".join(words[: len(words) // 2])}),  # half a question: clean
            json.dumps({"text": f"{q[: len(q) * 3 // 4]} {a}"}),  # most of it + the answer
        ]
        lines.insert(rng.randrange(len(lines)), variants[k % len(variants)])
        expected_hit.add(item)
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    sub = tmp_path / "more"
    sub.mkdir()
    (sub / "b.json").write_text(
        json.dumps([{"q": reference[7].question, "a": "x"}, {"q": "hello"}])
    )
    (sub / "c.csv").write_text(
        'id,text\n1,"' + reference[9].question.replace('"', '""') + '"\n2,plain\n'
    )
    (sub / "d.txt").write_text(f"Intro paragraph.\n\n{reference[11].question}\nmore\n\nOutro.\n")
    _write_arrow_files(sub / "e.parquet", sub / "f.arrow", ["nothing here", reference[13].question])
    (sub / "ignored.bin").write_bytes(b"\0\1")

    naive = naive_check(reference, [tmp_path])
    fast = check_inputs(reference, [tmp_path], workers=2, chunk_bytes=64 * 1024)
    assert _keys(fast) == _keys(naive)
    assert [m.score for m in sorted(fast.matches, key=lambda m: (m.source, m.locator))] == [
        m.score for m in sorted(naive.matches, key=lambda m: (m.source, m.locator))
    ]
    assert fast.n_records == naive.n_records
    flagged = {(m.source.rsplit("/", 1)[-1], m.locator.split()[0]) for m in fast.matches}
    assert {
        ("b.json", "item"),
        ("c.csv", "row"),
        ("d.txt", "paragraph"),
        ("e.parquet", "row"),
        ("f.arrow", "row"),
    } <= flagged
    assert len({m.test_index for m in fast.matches if m.source.endswith("a.jsonl")}) >= 10


def test_chunked_files_keep_true_line_numbers(tmp_path, reference):
    lines = [json.dumps({"text": f"filler line {i} " * 20}) for i in range(3000)]
    lines[2500] = json.dumps({"text": reference[5].question})
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = check_inputs(reference, [path], workers=2, chunk_bytes=32 * 1024)
    assert [m.locator for m in report.matches] == ["line 2501"]


def test_cli_json_output_and_exit_codes(tmp_path, reference):
    ref = write_reference(reference[:5], tmp_path / "TEST.json")
    assert len(load_reference(ref)) == 5
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_text(_chat(reference[2].question, reference[2].answer) + "\n")
    clean = tmp_path / "clean.jsonl"
    clean.write_text(json.dumps({"text": "An unrelated sentence about gardening."}) + "\n")
    result = run_ptb(
        "contamination",
        "check",
        "--reference",
        str(ref),
        "--input",
        str(dirty),
        str(clean),
        "--json",
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["contaminated"] is True and report["matches"][0]["test_index"] == 2
    result = run_ptb("contamination", "check", "--reference", str(ref), "--input", str(clean))
    assert result.returncode == 0 and "clean" in result.stdout


@pytest.mark.parametrize(
    "case", ["missing_reference", "bad_reference", "missing_input", "unsupported_input"]
)
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, case):
    data = tmp_path / "data.jsonl"
    data.write_text('{"text": "keep me"}\n')
    ref = tmp_path / "TEST.json"
    ref.write_text(
        json.dumps([{"question": "What is the capital of France, in one word?", "answer": "Paris"}])
    )
    args = {
        "missing_reference": ["--reference", str(tmp_path / "nope.json"), "--input", str(data)],
        "bad_reference": ["--reference", str(data), "--input", str(data)],
        "missing_input": ["--reference", str(ref), "--input", str(tmp_path / "nope.jsonl")],
        "unsupported_input": ["--reference", str(ref), "--input", str(ref.with_suffix(".bin"))],
    }[case]
    if case == "unsupported_input":
        ref.with_suffix(".bin").write_bytes(b"x")
    result = run_ptb("contamination", "check", *args)
    assert result.returncode == 2
    assert (
        result.stderr.strip().startswith("error:") and len(result.stderr.strip().splitlines()) == 1
    )
    assert data.read_text() == '{"text": "keep me"}\n'
