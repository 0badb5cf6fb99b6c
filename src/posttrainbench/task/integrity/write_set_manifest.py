"""`write_set/MANIFEST.json`: the agent's write set as the collect hook staged it.

The collect hook (in the agent's environment, after the agent ends) lists every file the
agent created or changed on a writable filesystem, unpacks each into scannable text
under ``write_set/text/`` and writes this manifest; the contamination judge (in the
verifier) reads both. The manifest says what was left out and why, and which caps cut
the staging short, so a judge never takes a partial write set for a whole one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.verdict import LimitHit

MANIFEST_NAME = "MANIFEST.json"
TEXT_DIR = "text"
# Entries listed one by one; past this many, only counts are kept (a million planted
# files must not make a manifest the judge cannot read).
MAX_LISTED = 20_000


class StagedText(BaseModel):
    """One staged text file and where its text came from."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(description="name under text/")
    origin: str = Field(
        description="the agent's file, then each layer unpacked: 'a.tar.gz ▸ gzip ▸ x.jsonl'"
    )
    fmt: str = Field(
        description="how the checker splits it into records: jsonl, json, csv, txt, parquet, arrow"
    )


class WriteSetEntry(BaseModel):
    """One file of the write set."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="absolute path in the agent's environment")
    size: int
    ctime: float
    kind: Literal["file", "symlink"]
    link_target: str | None = None
    scanned: bool = Field(description="unpacked into text/ (whole, within the caps)")
    note: str | None = Field(default=None, description="why it was not (fully) scanned")


class WriteSetManifest(BaseModel):
    """What the collect hook staged of the agent's write set."""

    model_config = ConfigDict(extra="forbid")

    since: float = Field(
        description="files whose ctime is at or after this (epoch seconds) are in the set"
    )
    since_source: str = Field(description="how 'since' was found")
    roots: list[str] = Field(description="mount points walked (the writable ones)")
    excluded: list[str] = Field(default_factory=list, description="paths not walked, and why")
    n_files: int = 0
    n_bytes: int = Field(default=0, description="size of every file in the set")
    read_bytes: int = Field(default=0, description="bytes read or decompressed to unpack them")
    staged_bytes: int = 0
    skipped_numeric_bytes: int = Field(
        default=0, description="checkpoint numbers not scanned (floats)"
    )
    entries: list[WriteSetEntry] = Field(default_factory=list)
    entries_not_listed: int = 0
    texts: list[StagedText] = Field(default_factory=list)
    undecoded: list[str] = Field(
        default_factory=list, description="contents not (fully) decoded, with why"
    )
    unread: list[str] = Field(
        default_factory=list,
        description="the part of undecoded that no decoder here reads at all (7z, rar, "
        "high-entropy bytes): the contamination verdict is then incomplete, never clean",
    )
    unread_not_listed: int = 0
    incomplete: list[LimitHit] = Field(default_factory=list)
    seconds: float = 0.0

    def write(self, directory: Path) -> Path:
        """Write MANIFEST.json into *directory*."""
        path = Path(directory) / MANIFEST_NAME
        path.write_text(self.model_dump_json(indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, directory: Path) -> WriteSetManifest:
        """Read and validate MANIFEST.json of a staged write set."""
        return cls.model_validate(
            json.loads((Path(directory) / MANIFEST_NAME).read_text(encoding="utf-8"))
        )
