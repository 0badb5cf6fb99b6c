"""The numpy scan (small inputs) and the numba kernel (large ones) give the same candidates,
and the on-disk reference cache gives the same index as building it afresh."""

from __future__ import annotations

import json
import random

import pytest

from posttrainbench.integrity.contamination import refcache
from posttrainbench.integrity.contamination.check import check_inputs
from posttrainbench.integrity.contamination.index import ReferenceIndex
from posttrainbench.integrity.contamination.prefilter import Signatures
from posttrainbench.integrity.contamination.records import line_records
from posttrainbench.integrity.contamination.reference import ReferenceItem
from tests.helpers import SHARED_DATA

GSM8K = SHARED_DATA / "gsm8k"
pytestmark = pytest.mark.skipif(
    not (GSM8K / "test.jsonl").exists(), reason="needs ../shared/data/gsm8k"
)


@pytest.fixture(scope="module")
def reference() -> list[ReferenceItem]:
    rows = [json.loads(x) for x in (GSM8K / "test.jsonl").read_text().splitlines()[:80]]
    return [ReferenceItem(question=r["question"], answer=r["answer"]) for r in rows]


@pytest.fixture(scope="module")
def signatures(reference) -> Signatures:
    return Signatures.build(ReferenceIndex.build(reference))


def _noisy(text: str, rng: random.Random) -> str:
    """The text with escapes, backslash runs, case and whitespace changes spliced in."""
    noise = ["\\n", "\\t", "\\\\", "\\\\\\", '\\"', "\\u00e9", "  ", "\t", "\r\n", "\\"]
    words = text.split(" ")
    for _ in range(rng.randrange(0, 6)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(noise))
    out = " ".join(words)
    return out.upper() if rng.random() < 0.2 else out


@pytest.mark.parametrize("fmt", ["jsonl", "txt"])
def test_numpy_scan_gives_the_kernels_pairs(reference, signatures, fmt):
    rng = random.Random(7)
    texts = [f"{r.question} {r.answer}" for r in reference]
    pieces = []
    for i in range(400):
        text = _noisy(rng.choice(texts), rng)
        if rng.random() < 0.5:  # half the records only partly a test item
            text = text[: rng.randrange(1, len(text) + 1)]
        pieces.append(
            json.dumps({"text": text})[: None if i % 50 else -3] if fmt == "jsonl" else text
        )
    sep = "\n" if fmt == "jsonl" else "\n \n"
    data = ("  \n" + sep.join(pieces) + "\\").encode()
    block = line_records(data, fmt)
    kernel = signatures.candidates(block.data, block.starts, "kernel")
    assert len(kernel) > 50
    assert signatures.candidates(block.data, block.starts, "numpy") == kernel


def test_cached_index_gives_the_same_signatures_and_matches(tmp_path, reference, monkeypatch):
    monkeypatch.setattr(refcache, "_fallback_dir", lambda: tmp_path / "unused")
    fresh = refcache.load_or_build(reference, None, tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("reference-*.npz"))) == 1
    cached = refcache.load_or_build(reference, None, tmp_path / "cache")
    for name, array in fresh[1].arrays().items():
        assert (cached[1].arrays()[name] == array).all(), name
    assert [cached[0].grams[i] for i in range(5)] == [fresh[0].grams[i] for i in range(5)]
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"q": reference[4].question, "a": reference[4].answer}) + "\n")
    report = check_inputs(reference, [path], use_cache=True, cache_dir=tmp_path / "cache")
    assert report.contaminated_test_items == [4]


def test_a_corrupt_cache_entry_is_rebuilt(tmp_path, reference, monkeypatch):
    monkeypatch.setattr(refcache, "_fallback_dir", lambda: tmp_path / "unused")
    refcache.load_or_build(reference, None, tmp_path)
    (entry,) = tmp_path.glob("reference-*.npz")
    entry.write_bytes(b"not an npz")
    index, signatures = refcache.load_or_build(reference, None, tmp_path)
    assert signatures.min_hits.size == len(reference)
    assert entry.stat().st_size > 100
