"""What the contamination judge scans, each file with the origin its evidence names.

In this order, within the judge's byte cap and deadline:

1. every file of ``final_model`` (chat template, tokenizer and generation configs, any
   other file; checkpoints give their headers and byte arrays, not their floats),
   unpacked here;
2. the staged write set (``write_set/``): text the collect hook already unpacked in the
   agent's environment, and the caps that cut that staging short;
3. the collected data files and the code snapshot, unpacked here, except files the
   write set already covered.

Links are never followed. What could not be read or decoded is listed as a note; what
no decoder here reads at all (7z, rar, high-entropy bytes) also makes the verdict
incomplete (cap ``decoder``).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.core.nofollow import FILE_FLAGS
from posttrainbench.core.verdict import LimitHit
from posttrainbench.task.integrity.contamination.staging import TextStager
from posttrainbench.task.integrity.contamination.unpack import UnpackBudget
from posttrainbench.task.integrity.judges.inputs import JudgeContext
from posttrainbench.task.integrity.write_set_manifest import TEXT_DIR, WriteSetManifest

# Where the collected copies came from in the agent's environment.
WORKSPACE = MODEL_LAYOUT.workspace
NOT_DATA = frozenset({"MANIFEST.json"})
MAX_NOTES = 20
UNREAD_SHOWN = 3


@dataclass
class ScanInputs:
    """Files for the checker, the origin of each, and what the gathering could not cover."""

    files: list[Path] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    incomplete: list[LimitHit] = field(default_factory=list)
    skipped_numeric: int = 0

    def add(self, path: Path, origin: str) -> None:
        """One file for the checker."""
        self.files.append(path)
        self.origins[str(path)] = origin


def gather(ctx: JudgeContext, scratch: Path) -> ScanInputs:
    """Collect the scan's inputs; unpacked text goes under *scratch* (see the module docstring)."""
    out = ScanInputs()
    max_bytes = ctx.max_bytes if ctx.max_bytes is not None else 1 << 62
    budget = UnpackBudget(max_bytes=max_bytes, deadline=ctx.deadline)
    stager = TextStager(scratch, budget, max_bytes)
    inputs = ctx.inputs
    if inputs.final_model is not None and inputs.final_model.is_dir():
        _unpack_tree(inputs.final_model, "final_model", stager, out, skip=set())
    covered = _write_set(inputs.write_set, budget, out) if inputs.write_set is not None else set()
    if inputs.write_set is None:
        out.notes.append(
            "no staged write set: only the collected data files and the code snapshot were checked"
        )
    for root in (inputs.data_files, inputs.code_snapshot):
        if root is not None and root.is_dir():
            _unpack_tree(root, WORKSPACE, stager, out, skip=covered, top_skip=NOT_DATA)
    for name, origin, _fmt in stager.written:
        out.add(scratch / name, origin)
    out.skipped_numeric += budget.skipped_numeric
    out.notes += [f"not decoded: {u}" for u in budget.undecoded[:MAX_NOTES]]
    if budget.unread:
        out.incomplete.append(unread_hit("decoding the agent's files", budget.unread))
    if budget.hit is not None:
        cap, detail = budget.hit
        out.incomplete.append(
            LimitHit(cap=cap, check="unpacking files for the n-gram scan", detail=detail)
        )
    return out


def _write_set(directory: Path, budget: UnpackBudget, out: ScanInputs) -> set[str]:
    """Add the staged write set's texts; the agent paths it scanned whole."""
    try:
        manifest = WriteSetManifest.read(directory)
    except (OSError, ValueError) as exc:
        out.missing.append(f"the staged write set ({directory}: {type(exc).__name__})")
        return set()
    out.incomplete += manifest.incomplete
    out.skipped_numeric += manifest.skipped_numeric_bytes
    out.notes += [f"not decoded in the write set: {u}" for u in manifest.undecoded[:MAX_NOTES]]
    if manifest.unread:
        out.incomplete.append(
            unread_hit("decoding the write set", manifest.unread, manifest.unread_not_listed)
        )
    for staged in manifest.texts:
        path = directory / TEXT_DIR / staged.file
        if "/" in staged.file or not _regular(path):
            out.notes.append(f"staged text {staged.file} is missing or not a plain file")
            continue
        if not budget.charge(path.stat().st_size, f"write_set/{staged.file}"):
            break
        out.add(path, staged.origin)
    return {e.path for e in manifest.entries if e.scanned}


def unread_hit(check: str, unread: list[str], not_listed: int = 0) -> LimitHit:
    """Content no decoder here reads, as what makes the verdict incomplete: it could hide
    anything (the first few named; all are in the notes or the write set's manifest)."""
    n = len(unread) + not_listed
    shown = "; ".join(unread[:UNREAD_SHOWN]) + ("; ..." if n > UNREAD_SHOWN else "")
    return LimitHit(
        cap="decoder", check=check, detail=f"{n} part(s) no decoder here reads: {shown}"
    )


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _unpack_tree(
    root: Path,
    shown: str,
    stager: TextStager,
    out: ScanInputs,
    skip: set[str],
    top_skip: frozenset[str] = frozenset(),
) -> None:
    """Unpack every plain file under *root* (links and special files noted, never followed)."""
    for directory, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        relative = Path(directory).relative_to(root)
        for name in sorted(files) + sorted(
            d for d in dirs if os.path.islink(os.path.join(directory, d))
        ):
            rel = (relative / name).as_posix()
            origin = f"{shown}/{rel}"
            if (relative == Path(".") and name in top_skip) or origin in skip:
                continue
            skip.add(origin)  # the code snapshot repeats small data files: scan each once
            if stager.budget.hit is not None:
                return
            note = _unpack_at(dir_fd, name, origin, stager)
            if note and len(out.notes) < MAX_NOTES:
                out.notes.append(f"{origin}: {note}")


def _unpack_at(dir_fd: int, name: str, origin: str, stager: TextStager) -> str | None:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        return f"not read ({'a link' if exc.errno == errno.ELOOP else exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a plain file: not read"
        return stager.add_file(handle, st.st_size, origin)
