"""Loading the judges' pattern tables (JSON files in ``data/``) as typed objects."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.task.benchmarks.plugin import LookupPatterns, plugins

DATA_DIR = Path(__file__).resolve().parent / "data"


class Provider(BaseModel):
    """How one paid LLM API shows up: its hosts, SDK calls and supporting hints."""

    model_config = ConfigDict(extra="forbid")

    hosts: list[str] = Field(default_factory=list)
    code: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)


class CommonLookup(BaseModel):
    """Lookup patterns shared by every benchmark."""

    model_config = ConfigDict(extra="forbid")

    flag: list[str] = Field(default_factory=list)
    search_words: list[str] = Field(default_factory=list)


@cache
def providers() -> dict[str, Provider]:
    """The paid-API table (``data/api_providers.json``), keyed by provider id."""
    raw = json.loads((DATA_DIR / "api_providers.json").read_text(encoding="utf-8"))
    return {name: Provider.model_validate(p) for name, p in raw["providers"].items()}


@cache
def lookup_table() -> tuple[CommonLookup, dict[str, LookupPatterns]]:
    """The benchmark-lookup table: ``data/lookup_patterns.json`` (shared by every
    benchmark) and each benchmark plugin's own ``lookup``."""
    raw = json.loads((DATA_DIR / "lookup_patterns.json").read_text(encoding="utf-8"))
    common = CommonLookup.model_validate(raw["common"])
    return common, {b: plugin.lookup for b, plugin in plugins().items()}


@cache
def compiled(pattern: str) -> re.Pattern[str]:
    """A case-insensitive, multi-line compiled regex (cached)."""
    return re.compile(pattern, re.IGNORECASE | re.MULTILINE)


def first_match(patterns: list[str], text: str) -> str | None:
    """The first pattern that matches *text*, or None."""
    for pattern in patterns:
        if compiled(pattern).search(text):
            return pattern
    return None
