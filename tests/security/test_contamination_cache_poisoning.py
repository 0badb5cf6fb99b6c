"""The reference-index cache (``ptb contamination check`` / check_contamination.sh) never
reaches the judges: an agent that plants a poisoned entry fools only its own checker.

Attack: build the cache entry of a decoy reference of the same size and store it under
the key of the real one, in the directory ``PTB_CONTAMINATION_CACHE`` names. Defence: the
contamination judge calls ``check_inputs`` without the cache, so it builds the index from
the sealed reference every time.
"""

from __future__ import annotations

import json

import pytest

from posttrainbench.task.integrity.contamination import refcache
from posttrainbench.task.integrity.contamination.check import check_inputs
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
from posttrainbench.task.integrity.contamination.report import CheckSettings
from posttrainbench.task.integrity.contamination.variants import expand
from tests.helpers import SHARED_DATA

GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
pytestmark = pytest.mark.skipif(not GSM8K.exists(), reason="needs ../shared/data/gsm8k")


def test_a_planted_cache_entry_fools_the_cached_check_but_not_the_judges(tmp_path, monkeypatch):
    rows = [json.loads(x) for x in GSM8K.read_text().splitlines()[:80]]
    reference = [ReferenceItem(question=r["question"], answer=r["answer"]) for r in rows]
    # The cached path indexes (and keys its entry by) every item with its variants
    # (variants.py): the planted entry has as many items as that, none of their text.
    indexed = expand(reference).items
    decoy = [
        ReferenceItem(question=f"unrelated filler sentence {i} " * 8) for i in range(len(indexed))
    ]
    cache = tmp_path / "cache"
    monkeypatch.setenv(refcache.CACHE_ENV, str(cache))
    monkeypatch.setattr(refcache, "_fallback_dir", lambda: tmp_path / "unused")

    refcache.load_or_build(decoy, None, cache)
    (planted,) = cache.glob("reference-*.npz")
    planted.rename(cache / f"reference-{refcache.cache_key(indexed, CheckSettings())}.npz")

    training = tmp_path / "sft.jsonl"
    training.write_text(json.dumps({"q": reference[4].question, "a": reference[4].answer}) + "\n")
    # The attack is real: the cached path believes the decoy's index.
    fooled = check_inputs(reference, [training], use_cache=True, cache_dir=cache)
    assert fooled.contaminated_test_items != [4]
    # What the contamination judge runs (judges/contamination.py) ignores the cache.
    judged = check_inputs(reference, [training])
    assert judged.contaminated_test_items == [4]
