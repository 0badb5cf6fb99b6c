"""The typed manifest written next to each prepared benchmark's split files."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.schemas import _FileModel


class SplitInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(ge=0)
    sha256: str


class DataManifest(_FileModel):
    """What ``ptb data prepare`` fetched for one benchmark, and from where."""

    benchmark: str
    provenance: str
    prepared_at: str
    splits: dict[str, SplitInfo]
    # natural: the source has a held-out split; carved: dev ids were taken from test,
    # and a dev-feedback task scores on test minus those ids.
    dev_source: Literal["natural", "carved"]
    carved_dev_ids: list[str] = Field(default_factory=list)
