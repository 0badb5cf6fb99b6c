"""Replace known secret values and common key shapes with `[REDACTED:<name>]`.

A Scrubber works on bytes, so files in any encoding pass through unchanged except
for the secrets. Known values shorter than MIN_LITERAL_BYTES are not used as literal
needles: short strings ("password", "12345") occur everywhere and would shred logs;
such values are still caught if they have a key's shape. Directory trees are scrubbed
in place, one file at a time, atomically (temp file + rename): an interrupted scrub
leaves every file either as it was or fully scrubbed. Binary and weight files are
skipped (by suffix, and by a NUL byte in their first 8 KiB); large files are streamed.

A run directory holds what the agent wrote, and a process it left behind may still be
rearranging it while the scrub runs. So the walk never follows a link (`safe_fs`: each
directory opened by fd, no-follow), a file is rewritten by a rename inside the fd of the
directory it was read from, never through a path, and links, special files and
hard-linked files are skipped and listed. An entry that vanishes or is swapped during the
scrub is listed or left alone, never a crash.

Runs on the host and in sandboxes: stdlib + pydantic only.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field

from posttrainbench.core.nofollow import Refused, replace_at
from posttrainbench.core.safe_fs import MAX_DEPTH, MAX_REFUSALS_KEPT, SafeDir
from posttrainbench.core.weights import BINARY_DATA_SUFFIXES, WEIGHT_SUFFIXES
from posttrainbench.host.credentials.patterns import (
    KEY_PATTERNS,
    MAX_PATTERN_BYTES,
    KeyPattern,
    looks_secret_name,
)

MIN_LITERAL_BYTES = 8
STREAM_THRESHOLD = 8 << 20  # files above this size are streamed in chunks
CHUNK_BYTES = 1 << 20
SNIFF_BYTES = 8192
# Weights, large binary data and other binary formats: not scrubbed as text.
BINARY_SUFFIXES = frozenset(
    (
        *WEIGHT_SUFFIXES,
        *BINARY_DATA_SUFFIXES,
        ".pkl",
        ".pickle",
        ".so",
        ".o",
        ".a",
        ".pyc",
        ".whl",
        ".zip",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".zst",
        ".tar",
        ".7z",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".pdf",
        ".sqlite",
        ".db",
        ".mp4",
        ".wav",
        ".mp3",
    )
)
_LOOKBEHIND_CONTEXT = 64  # bytes kept before a chunk boundary for the patterns' left checks
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.:/\-]")


class ScrubReport(BaseModel):
    """What a scrub did: counts and the names of what was replaced, never the values."""

    files_scanned: int = 0
    files_changed: int = 0
    files_skipped: int = Field(
        default=0, description="Binary or weight files, and the files refused"
    )
    replacements: int = 0
    by_name: dict[str, int] = Field(default_factory=dict)
    failures: list[str] = Field(
        default_factory=list, description="'path: error' of files left as they were"
    )
    refused: list[str] = Field(
        default_factory=list,
        description="'path: why' of entries never opened (links, special or hard-linked files, too deep), "
        "the first ones only",
    )
    refused_more: int = Field(default=0, description="Refused entries past those listed")

    def add(self, counts: Counter[str]) -> None:
        """Fold one file's replacement counts into the report."""
        for name, count in counts.items():
            self.by_name[name] = self.by_name.get(name, 0) + count
            self.replacements += count

    def refuse(self, path: str, why: str) -> None:
        """List an entry the scrub did not open (an agent can plant millions: only the first are kept)."""
        if len(self.refused) < MAX_REFUSALS_KEPT:
            self.refused.append(f"{_printable(path)}: {why}")
        else:
            self.refused_more += 1

    def fail(self, path: str, why: str) -> None:
        """List a file left as it was."""
        self.failures.append(f"{_printable(path)}: {why}")


def secret_env_values(env: Mapping[str, str]) -> dict[str, str]:
    """Values of variables whose names look secret (`*_API_KEY`, `*_TOKEN`, `*PASSWORD*`)."""
    return {name: value for name, value in env.items() if value and looks_secret_name(name)}


class Scrubber:
    """Finds and replaces secrets; build one per run from every value that must not leak."""

    def __init__(
        self, known: Mapping[str, str], patterns: Iterable[KeyPattern] = KEY_PATTERNS
    ) -> None:
        needles: dict[bytes, str] = {}
        for name, value in known.items():
            for variant in _variants(value):
                if len(variant) >= MIN_LITERAL_BYTES:
                    needles.setdefault(variant, _SAFE_NAME.sub("_", name))
        # Longest needles first so a value containing another wins. Each needle is found
        # with bytes.find and each shape with its own regex: both scan at hundreds of MB/s,
        # where one big alternation crawls.
        self._needles = sorted(needles.items(), key=lambda kv: -len(kv[0]))
        self._shapes = [(pattern.name, re.compile(pattern.regex)) for pattern in patterns]
        longest = max((len(needle) for needle in needles), default=0)
        # A streamed chunk keeps this much unprocessed tail: more than any match can span.
        self._overlap = max(4 * MAX_PATTERN_BYTES, 2 * longest)

    @classmethod
    def for_run(cls, env: Mapping[str, str], extra: Mapping[str, str] = ()) -> Scrubber:
        """Every secret-looking variable of `env` plus `extra` (resolved credentials)."""
        return cls({**secret_env_values(env), **dict(extra)})

    # --- in memory -------------------------------------------------------------------

    def scrub_bytes(self, data: bytes) -> tuple[bytes, Counter[str]]:
        """Scrubbed copy of `data` and the replacement count per name."""
        counts: Counter[str] = Counter()
        out, _ = self._substitute(data, 0, None, counts)
        return out, counts

    def scrub_text(self, text: str) -> str:
        """Scrubbed copy of `text`."""
        out, _ = self.scrub_bytes(text.encode("utf-8", "surrogateescape"))
        return out.decode("utf-8", "surrogateescape")

    def scrub_json_value(self, value: object, counts: Counter[str] | None = None) -> object:
        """Scrub every string (keys included) of a parsed JSON value; structure is kept."""
        counts = Counter() if counts is None else counts
        if isinstance(value, str):
            out, found = self.scrub_bytes(value.encode("utf-8", "surrogatepass"))
            counts.update(found)
            return out.decode("utf-8", "surrogatepass")
        if isinstance(value, list):
            return [self.scrub_json_value(item, counts) for item in value]
        if isinstance(value, dict):
            return {
                self.scrub_json_value(k, counts): self.scrub_json_value(v, counts)
                for k, v in value.items()
            }
        return value

    def _substitute(
        self, buf: bytes, pos: int, limit: int | None, counts: Counter[str]
    ) -> tuple[bytes, int]:
        """Replace matches in buf[pos:]; with `limit`, stop before any match reaching past
        it (it may continue in the next chunk). Returns the output and where it stopped."""
        stop_at = len(buf) if limit is None else limit
        # Known values first; shapes only in the gaps between them, so a greedy shape
        # never swallows the start of a known value.
        literals = _first_come(
            (start, start + len(needle), rank, name)
            for rank, (needle, name) in enumerate(self._needles)
            for start in _find_all(buf, needle, pos)
        )
        spans: list[tuple[int, int, int, str]] = []
        gap_start = pos
        for literal in [*literals, None]:
            gap_end = literal[0] if literal else len(buf)
            if gap_end > gap_start:
                spans.extend(
                    _first_come(
                        (m.start(), m.end(), rank, name)
                        for rank, (name, regex) in enumerate(self._shapes)
                        for m in regex.finditer(buf, gap_start, gap_end)
                    )
                )
            if literal is not None:
                spans.append(literal)
                gap_start = literal[1]
        out: list[bytes] = []
        last = pos
        for start, end, _, name in spans:
            if limit is not None and end > limit:
                stop_at = min(start, limit)
                break
            counts[name] += 1
            out.append(buf[last:start])
            out.append(b"[REDACTED:%s]" % name.encode())
            last = end
        out.append(buf[last:stop_at])
        return b"".join(out), stop_at

    def _stream(self, src: BinaryIO, dst: BinaryIO, size: int, counts: Counter[str]) -> None:
        buf, pos = b"", 0
        while True:
            data = src.read(min(CHUNK_BYTES, size))
            size -= len(data)
            if not data:
                out, _ = self._substitute(buf, pos, None, counts)
                dst.write(out)
                return
            buf += data
            if len(buf) - pos < 2 * self._overlap:
                continue
            out, stop = self._substitute(buf, pos, len(buf) - self._overlap, counts)
            dst.write(out)
            keep = max(0, stop - _LOOKBEHIND_CONTEXT)
            buf, pos = buf[keep:], stop - keep

    # --- files -----------------------------------------------------------------------

    def scrub_file(self, path: Path) -> Counter[str] | None:
        """Scrub one file in place, atomically; None when it was skipped as binary.

        The directory is the caller's to name; the file itself is opened without following
        a link, and `core.nofollow.Refused` is raised for a link, a special, hard-linked or sparse file.
        """
        with SafeDir.open(path.parent) as parent:
            return self._scrub_at(parent, path.name)

    def _scrub_at(self, parent: SafeDir, name: str) -> Counter[str] | None:
        if Path(name).suffix.lower() in BINARY_SUFFIXES:
            return None
        fd, st = parent.open_file(name)
        with open(fd, "rb") as src:  # closes fd
            if b"\0" in os.pread(fd, SNIFF_BYTES, 0):
                return None
            # Only the bytes there when it was opened: a process that keeps the file growing
            # must not keep the scrub reading.
            counts: Counter[str] = Counter()
            if st.st_size > STREAM_THRESHOLD:

                def stream(out: int) -> None:
                    with open(out, "wb", closefd=False) as dst:
                        self._stream(src, dst, st.st_size, counts)

                _replace(parent, name, st, stream, keep=lambda: bool(counts))
                return counts
            data = src.read(st.st_size)
        out, counts = self.scrub_bytes(data)
        if counts and Path(name).suffix.lower() == ".json":
            out = self._keep_json_valid(data, out, counts)
        if counts:
            _replace(parent, name, st, lambda new: _write_all(new, out))
        return counts

    def _keep_json_valid(self, original: bytes, scrubbed: bytes, counts: Counter[str]) -> bytes:
        # A literal that spans JSON syntax could break the document; then scrub its strings.
        try:
            document = json.loads(original)
        except ValueError:
            return scrubbed
        try:
            json.loads(scrubbed)
            return scrubbed
        except ValueError:
            counts.clear()
            cleaned = self.scrub_json_value(document, counts)
            return json.dumps(cleaned, indent=2, ensure_ascii=False).encode(
                "utf-8", "surrogatepass"
            )

    def scrub_tree(self, root: Path, exclude: Iterable[Path] = ()) -> ScrubReport:
        """Scrub every text file under `root` in place, following no link below it.

        Links, special and hard-linked files are skipped and listed in `refused`, as are a
        directory swapped for a link while the scrub ran and directories nested deeper than
        `core.safe_fs.MAX_DEPTH`. A file that cannot be read or replaced is left as it was and
        listed in `failures`; anything else (Ctrl-C) stops the walk with every file whole.
        """
        report = ScrubReport()
        if root.is_file():
            with SafeDir.open(root.parent) as parent:
                self._scrub_one(parent, root.name, root, report)
            return report
        excluded = _identities(exclude)
        try:
            top = SafeDir.open(root)
        except FileNotFoundError:
            return report  # nothing was written there
        with top:
            pending = [""]
            while pending:
                relative = pending.pop()
                subdirs = []
                try:
                    with top.subdir(relative) as here:
                        for name, st in here.entries():
                            shown = f"{relative}/{name}" if relative else name
                            if (st.st_dev, st.st_ino) in excluded:
                                continue
                            if stat.S_ISDIR(st.st_mode):
                                subdirs.append(shown)
                            else:
                                self._scrub_one(here, name, root / shown, report)
                except Refused as exc:  # swapped for a link after its parent was listed
                    report.refuse(str(root / relative), exc.reason)
                except OSError as exc:
                    report.fail(str(root / relative), exc.strerror or str(exc))
                for shown in reversed(subdirs):
                    if shown.count("/") >= MAX_DEPTH:
                        report.refuse(
                            str(root / shown), f"nested deeper than {MAX_DEPTH} directories"
                        )
                    else:
                        pending.append(shown)
        return report

    def _scrub_one(self, parent: SafeDir, name: str, path: Path, report: ScrubReport) -> None:
        try:
            counts = self._scrub_at(parent, name)
        except Refused as exc:
            report.files_skipped += 1
            report.refuse(str(path), exc.reason)
            return
        except OSError as exc:
            report.fail(str(path), exc.strerror or str(exc))
            return
        if counts is None:
            report.files_skipped += 1
            return
        report.files_scanned += 1
        if counts:
            report.files_changed += 1
            report.add(counts)


def _find_all(buf: bytes, needle: bytes, pos: int) -> Iterable[int]:
    start = buf.find(needle, pos)
    while start >= 0:
        yield start
        start = buf.find(needle, start + len(needle))


def _first_come(spans: Iterable[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """Non-overlapping spans, leftmost first; at one start, the lowest rank (the longer
    needle, or the earlier pattern) wins."""
    kept: list[tuple[int, int, int, str]] = []
    for span in sorted(spans, key=lambda s: (s[0], s[2])):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def _variants(value: str) -> list[bytes]:
    """The value as it appears raw, inside JSON strings (escaped quotes, slashes, unicode)
    and as Harbor masks it."""
    raw = value.strip()
    if not raw:
        return []
    forms = {
        raw,
        json.dumps(raw)[1:-1],
        json.dumps(raw, ensure_ascii=False)[1:-1],
        raw.replace("/", "\\/"),
    }
    if len(raw) > 8:
        # Harbor masks literal secrets in its config files as first 4 + "****" + last 3.
        forms.add(f"{raw[:4]}****{raw[-3:]}")
    return [form.encode("utf-8", "surrogateescape") for form in forms]


def _replace(
    parent: SafeDir,
    name: str,
    read: os.stat_result,
    write: Callable[[int], None],
    keep: Callable[[], bool] = lambda: True,
) -> None:
    """Replace *name* in *parent* by what *write* puts in a new file with the permission bits
    of the file read (whatever *name* has become meanwhile, only that entry of *parent* changes)."""
    # Not the set-id bits: the new file belongs to whoever runs the scrub, root perhaps.
    replace_at(parent.fd, name, write, read.st_mode & 0o777, keep=keep, suffix=".scrub")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _identities(paths: Iterable[Path]) -> set[tuple[int, int]]:
    """(device, inode) of each path (not of a link's target); a path that does not exist is left out.

    Compared by identity, not by resolved name: resolving a name below the run directory
    would follow the agent's links (and raises on a link loop).
    """
    found = set()
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        found.add((st.st_dev, st.st_ino))
    return found


def _printable(text: str) -> str:
    """*text* with the undecodable bytes of a file name escaped: the report is written as UTF-8 JSON."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
