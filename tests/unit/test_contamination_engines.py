"""The numpy scan gives the candidates of a byte-by-byte reference scan (slice size does not
matter), and the on-disk reference cache gives the same index as building it afresh."""

from __future__ import annotations

import json
import random

import pytest

from posttrainbench.task.integrity.contamination import refcache, vectorscan
from posttrainbench.task.integrity.contamination.check import check_inputs
from posttrainbench.task.integrity.contamination.index import ReferenceIndex
from posttrainbench.task.integrity.contamination.prefilter import _TABLE, Signatures
from posttrainbench.task.integrity.contamination.records import line_records
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
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


def _reference_scan(sig: Signatures, data: bytes, starts: list[int]) -> set[tuple[int, int]]:
    """The prefilter's rule, byte by byte in plain Python (slow, obviously right)."""
    norm, norm_starts = bytearray(), []
    rec, prev_space, i = 0, True, 0
    while i < len(data):
        while rec < len(starts) and starts[rec] <= i:
            norm_starts.append(len(norm))
            rec += 1
            prev_space = True  # a record starts fresh: no leading space
        c = data[i]
        if c == 0x5C and i + 1 < len(data):  # a JSON escape: both bytes together
            if data[i + 1] in b"ntrf":
                if not prev_space:
                    norm.append(0x20)
                prev_space = True
            else:
                norm += b"\x01\x01"
                prev_space = False
            i += 2
            continue
        c = _TABLE[c]
        if c != 0x20 or not prev_space:
            norm.append(c)
        prev_space = c == 0x20
        i += 1
    norm_starts += [len(norm)] * (len(starts) - len(norm_starts))
    sid_of = {int(v): k for k, v in enumerate(sig.values)}
    pairs = {(r, i) for r in range(len(starts)) for i in sig.always}
    for rec, begin in enumerate(norm_starts):
        end = norm_starts[rec + 1] if rec + 1 < len(norm_starts) else len(norm)
        sids = {
            sid_of[v]
            for k in range(begin + 1, end - 7)
            if norm[k - 1] == 0x20 and (v := int.from_bytes(norm[k : k + 8], "little")) in sid_of
        }
        counts: dict[int, int] = {}
        for sid in sids:
            for p in range(sig.item_ptr[sid], sig.item_ptr[sid + 1]):
                item = int(sig.items[p])
                counts[item] = counts.get(item, 0) + int(sig.weights[p])
        pairs |= {
            (rec, item)
            for item, n in counts.items()
            if n + sig.unsigned[item] >= sig.min_hits[item]
        }
    return pairs


@pytest.mark.parametrize("fmt", ["jsonl", "txt"])
@pytest.mark.parametrize("slice_bytes", [vectorscan.SLICE_BYTES, 997])
def test_numpy_scan_gives_the_reference_scans_pairs(
    reference, signatures, fmt, slice_bytes, monkeypatch
):
    monkeypatch.setattr(vectorscan, "SLICE_BYTES", slice_bytes)
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
    expected = _reference_scan(signatures, block.data, block.starts)
    assert len(expected) > 50
    assert signatures.candidates(block.data, block.starts) == expected


def test_edge_blocks_scan_like_the_reference(signatures, reference):
    question = reference[3].question.encode()
    for data in (b"x", b"\\", b" " * 9, b"\t\n\\\\n" + question, question + b"\\", question):
        starts = [0] if data.strip() else []
        assert signatures.candidates(data, starts) == _reference_scan(signatures, data, starts)


def test_records_starting_anywhere_scan_like_the_reference(signatures, reference):
    # Real records follow a newline; the rules must not depend on it.
    rng = random.Random(11)
    text = "  ".join(f"{r.question}  {r.answer.upper()}" for r in reference[:30]).encode()
    for _ in range(20):
        starts = sorted(rng.sample(range(len(text)), rng.randrange(1, 60)))
        assert signatures.candidates(text, starts) == _reference_scan(signatures, text, starts)


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
