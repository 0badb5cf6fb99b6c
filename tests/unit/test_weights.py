"""The weight-file suffixes have one home; every other list is a named part of it."""

from __future__ import annotations

from posttrainbench.core.weights import (
    BINARY_DATA_SUFFIXES,
    CHECKPOINT_SUFFIXES,
    TRANSFORMERS_WEIGHT_SUFFIXES,
    WEIGHT_SUFFIXES,
)
from posttrainbench.host.credentials.scrub import BINARY_SUFFIXES
from posttrainbench.task.sandbox.snapshot import SKIPPED_SUFFIXES


def test_each_list_is_a_named_part_of_the_weight_suffixes() -> None:
    assert set(TRANSFORMERS_WEIGHT_SUFFIXES) < set(CHECKPOINT_SUFFIXES) < set(WEIGHT_SUFFIXES)
    assert not set(BINARY_DATA_SUFFIXES) & set(WEIGHT_SUFFIXES)
    assert len(set(WEIGHT_SUFFIXES)) == len(WEIGHT_SUFFIXES)


def test_snapshots_and_the_scrubber_skip_every_weight_format() -> None:
    assert set(WEIGHT_SUFFIXES) | set(BINARY_DATA_SUFFIXES) == SKIPPED_SUFFIXES
    assert set(WEIGHT_SUFFIXES) | set(BINARY_DATA_SUFFIXES) <= BINARY_SUFFIXES
