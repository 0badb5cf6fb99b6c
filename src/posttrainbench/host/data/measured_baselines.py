"""Base-model scores measured here with `ptb baseline`, kept in the cache with machine and date.

`ptb list baselines` lists them beside the plugins' published numbers, and the
leaderboard uses a measurement of the whole test set for its exact (benchmark, model)
before the catalog's (a measurement on the first N questions only, `--limit`, is listed
but never stands in for a score on all of them). One entry per (benchmark, model,
limit): a new measurement replaces the older one.
"""

from __future__ import annotations

import os
import platform
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import PtbError
from posttrainbench.host.catalog.baselines import BaselineEntry
from posttrainbench.host.data.prepare import default_cache_dir

MEASURED_FILE = Path("baselines") / "measured.json"


class MeasuredBaseline(BaseModel):
    """One `ptb baseline` measurement."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    model: str
    score: float = Field(ge=0.0, le=1.0)
    stderr: float | None = None
    n: int = Field(ge=1)
    limit: int | None = Field(default=None, description="scored only the first N questions")
    backend: str | None = None
    measured_at: datetime
    machine: str = Field(description="host, architecture and CPU count of the measuring machine")

    @property
    def whole_test_set(self) -> bool:
        """Whether it scored every test question (only then can it stand in for a score)."""
        return self.limit is None

    def entry(self) -> BaselineEntry:
        """As a catalog-style entry, its provenance naming the machine and the date."""
        part = "" if self.whole_test_set else f", first {self.limit} questions only"
        return BaselineEntry(
            benchmark=self.benchmark,
            model=self.model,
            kind="zero_shot",
            score=self.score,
            n=self.n,
            provenance=f"measured with `ptb baseline` on {self.machine}, "
            f"{self.measured_at:%Y-%m-%d %H:%M} UTC{part}",
        )


_ALL = TypeAdapter(list[MeasuredBaseline])


def this_machine() -> str:
    """A short description of this machine for a measurement's provenance."""
    return f"{platform.node() or 'unknown host'} ({platform.machine()}, {os.cpu_count()} CPUs)"


def measured_path(cache_dir: Path | None = None) -> Path:
    """Where the measurements are kept."""
    return (cache_dir or default_cache_dir()) / MEASURED_FILE


def load_measured(cache_dir: Path | None = None) -> list[MeasuredBaseline]:
    """Every stored measurement; an unreadable file is one clear error, never ignored."""
    path = measured_path(cache_dir)
    if not path.is_file():
        return []
    try:
        return _ALL.validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError) as exc:
        raise PtbError(
            f"{path} is not a valid list of measured baselines ({str(exc).splitlines()[0]}); "
            "remove it to start again"
        ) from None


def record_measured(measured: MeasuredBaseline, cache_dir: Path | None = None) -> Path:
    """Add *measured*, replacing an older one of the same benchmark, model and limit."""
    same = (measured.benchmark, measured.model, measured.limit)
    kept = [m for m in load_measured(cache_dir) if (m.benchmark, m.model, m.limit) != same]
    path = measured_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, _ALL.dump_json([*kept, measured], indent=2).decode() + "\n")


def measured_entries(cache_dir: Path | None = None) -> list[BaselineEntry]:
    """The whole-test-set measurements, as entries the leaderboard may use."""
    return [m.entry() for m in load_measured(cache_dir) if m.whole_test_set]
