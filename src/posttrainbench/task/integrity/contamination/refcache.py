"""An on-disk cache of the reference's tokens and signatures, so a repeated check starts fast.

Tokenizing a reference and choosing its signatures takes a second or two (1319 GSM8K
items), longer than scanning a small file; agents check often, always against the same
reference. The cache is one ``.npz`` file (numpy arrays only, read without pickle) named
by a hash of the items, the settings and this code, so any change makes a new entry.
Only the command uses it (`run_check`); judges build the index afresh every time.
A cache that cannot be read or written is ignored: the check is only slower.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from posttrainbench.task.integrity.contamination.index import ItemTokens, ReferenceIndex
from posttrainbench.task.integrity.contamination.prefilter import Signatures
from posttrainbench.task.integrity.contamination.reference import ReferenceItem
from posttrainbench.task.integrity.contamination.report import CheckSettings

CACHE_ENV = "PTB_CONTAMINATION_CACHE"
# The code whose output is cached: editing any of these files invalidates old entries.
_SOURCES = (
    "index.py",
    "prefilter.py",
    "normalize.py",
    "scoring.py",
    "tokens.py",
    "refcache.py",
    "variants.py",
)
_PARTS = ("question", "answer", "passage")


def default_cache_dir() -> Path:
    """$PTB_CONTAMINATION_CACHE, else the user's cache directory, else one under /tmp."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
    return Path(base) / "posttrainbench" / "contamination"


def _fallback_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"ptb-contamination-{os.getuid()}"


def cache_key(items: list[ReferenceItem], settings: CheckSettings) -> str:
    """A hash of everything the cached arrays depend on."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in _SOURCES:
        digest.update((here / name).read_bytes())
    digest.update(settings.model_dump_json().encode())
    digest.update(json.dumps([i.model_dump() for i in items], ensure_ascii=False).encode())
    return digest.hexdigest()[:32]


def _pack(tokens: list[ItemTokens]) -> dict[str, np.ndarray]:
    out = {}
    for k, part in enumerate(_PARTS):
        lists = [t[k] for t in tokens]
        lengths = [-1 if x is None else len(x) for x in lists]
        out[f"{part}_len"] = np.array(lengths, dtype=np.int64)
        out[f"{part}_tok"] = np.array([v for x in lists if x for v in x], dtype=np.int64)
    return out


def _unpack(arrays: dict[str, np.ndarray], n_items: int) -> list[ItemTokens]:
    columns = []
    for part in _PARTS:
        lengths, flat = arrays[f"{part}_len"].tolist(), arrays[f"{part}_tok"].tolist()
        if len(lengths) != n_items or sum(max(0, n) for n in lengths) != len(flat):
            raise ValueError("token arrays do not match the reference")
        column, pos = [], 0
        for n in lengths:
            column.append(None if n < 0 else flat[pos : pos + n])
            pos += max(0, n)
        columns.append(column)
    return [(q or [], a, p) for q, a, p in zip(*columns)]


def load_or_build(
    items: list[ReferenceItem], settings: CheckSettings | None, directory: Path | None = None
) -> tuple[ReferenceIndex, Signatures]:
    """The index and signatures of *items*, from the cache when an entry is there."""
    settings = settings or CheckSettings()
    key = cache_key(items, settings)
    dirs = [directory or default_cache_dir(), _fallback_dir()]
    for d in dirs:
        path = d / f"reference-{key}.npz"
        if _trusted(d) and path.is_file():
            try:
                with np.load(path, allow_pickle=False) as data:
                    arrays = {name: data[name] for name in data.files}
                tokens = _unpack(arrays, len(items))
                signatures = Signatures.from_arrays(
                    {k.removeprefix("sig_"): v for k, v in arrays.items() if k.startswith("sig_")}
                )
                if signatures.min_hits.size != len(items):
                    raise ValueError("signatures do not match the reference")
                return ReferenceIndex.from_tokens(items, tokens, settings), signatures
            except (OSError, ValueError, KeyError, IndexError):
                pass  # unreadable or stale: rebuild it below
    index = ReferenceIndex.build(items, settings)
    signatures = Signatures.build(index)
    arrays = _pack(index.tokens) | {f"sig_{k}": v for k, v in signatures.arrays().items()}
    for d in dirs:
        if _write(d / f"reference-{key}.npz", arrays):
            break
    return index, signatures


def _trusted(directory: Path) -> bool:
    """Ours and writable by no one else: in a shared /tmp, another user could plant entries."""
    try:
        st = directory.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _write(path: Path, arrays: dict[str, np.ndarray]) -> bool:
    """Write atomically (concurrent checks may race); False when the directory is not usable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _trusted(path.parent):
            return False
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                # Named arrays only; numpy's stubs confuse **arrays with allow_pickle.
                np.savez(handle, **arrays)  # type: ignore[arg-type]
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return True
    except OSError:
        return False
