"""The typed manifest written next to each prepared benchmark's split files."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.task.schemas import _FileModel


class SplitInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(ge=0)
    sha256: str


class SourceFileInfo(BaseModel):
    """One file the splits were built from: provenance a reader can check against a copy."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="what the benchmark's source reads it as, e.g. 'test', 'train'")
    location: str = Field(
        description="URL, package member, or the absolute path it was imported from"
    )
    sha256: str = Field(description="sha256 of the file's bytes as read")
    rows: int = Field(ge=0)


class DataManifest(_FileModel):
    """What ``ptb data prepare`` (or ``ptb data import``) stored for one benchmark, and from where."""

    benchmark: str
    provenance: str
    prepared_at: str
    splits: dict[str, SplitInfo]
    # natural: the source has a held-out split; carved: dev ids were taken from test,
    # and a dev-feedback task scores on test minus those ids.
    dev_source: Literal["natural", "carved"]
    carved_dev_ids: list[str] = Field(default_factory=list)
    # download: `ptb data prepare` fetched the files; import: `ptb data import` read them
    # from `imported_from`. Defaults keep manifests written before these fields readable.
    origin: Literal["download", "import"] = "download"
    imported_from: str | None = None
    source_files: list[SourceFileInfo] = Field(default_factory=list)
    definition: str | None = Field(
        default=None,
        description="benchmarks.source.definition_digest when prepared; None: an older entry",
    )
