"""Hand ``final_model/`` and the agent's logs to the verifier, within caps (the collect hook).

Runs in the agent's environment as root after ``stop_agent.sh`` has killed every
process of the agent's user, so nothing changes the tree while it is measured. It:

- moves ``/app/final_model`` into the artifacts dir (a rename; a copy onto a cloud
  trial's volume) unless it is missing or not a real directory;
- removes every entry that is neither a directory nor a regular file (links, FIFOs,
  sockets): the verifier must load exactly the bytes the judges read;
- rejects it when its apparent or allocated size passes the cap (a multiple of the base
  model's size) or it holds too many files: it is deleted, nothing is scored, and the
  reason goes to ``handoff.json``, which the verifier turns into ``metrics.json``'s error;
- copies ``/logs/agent`` to ``agent_logs/`` without following links, within a byte cap.

Usage: python -P -m posttrainbench.task.sandbox.handoff --out /logs/artifacts
           --base-model /opt/ptb/models/base [--size-factor F] [--handoff-dir DIR]
           [--agent-survivors N]
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.core.nofollow import DIR_FLAGS
from posttrainbench.core.safe_fs import CopyBudget, SafeDir

HANDOFF_FILE = "handoff.json"
FINAL_MODEL = "final_model"
AGENT_LOGS = "agent_logs"
ON_VOLUME_FILE = "final_model_on_volume"
# final_model may be this many times the base model's size (a float32 save of a bf16
# model doubles it), plus room for tokenizer and config files.
DEFAULT_SIZE_FACTOR = 3.0
SIZE_SLACK_BYTES = 64 * 1024**2
MAX_FINAL_MODEL_FILES = 10_000
AGENT_LOGS_MAX_BYTES = 2 * 1024**3
AGENT_LOGS_MAX_FILES = 100_000
MAX_LISTED = 100
MAX_DEPTH = 64  # directory nesting a model has no use for

Status = Literal["collected", "on_volume", "missing", "rejected"]


class TreeSize(BaseModel):
    """What a directory tree holds, measured without following links."""

    model_config = ConfigDict(extra="forbid")

    apparent_bytes: int = Field(default=0, description="sum of the regular files' sizes")
    allocated_bytes: int = Field(
        default=0, description="disk blocks of every entry (a sparse file counts what it uses)"
    )
    files: int = 0
    removed: list[str] = Field(
        default_factory=list, description="entries that were not directories or regular files"
    )


class Handoff(BaseModel):
    """``/logs/artifacts/handoff.json``: what the collect hook handed to the verifier, and why not."""

    model_config = ConfigDict(extra="forbid")

    status: Status
    reason: str | None = None
    size: TreeSize | None = None
    cap_bytes: int | None = None
    max_files: int = MAX_FINAL_MODEL_FILES
    agent_survivors: int = Field(
        default=0, description="processes of the agent's user left alive after stop_agent.sh"
    )
    agent_logs_refused: list[str] = Field(default_factory=list)

    def write(self, out: Path) -> Path:
        """Write it into the artifacts dir (a fresh file: the dir is root's)."""
        path = out / HANDOFF_FILE
        path.unlink(missing_ok=True)
        path.write_text(self.model_dump_json(indent=2) + "\n")
        return path

    @classmethod
    def read(cls, artifacts: Path) -> Handoff | None:
        """The record beside ``final_model``, or None when the hook wrote none."""
        path = artifacts / HANDOFF_FILE
        if not path.is_file() or path.is_symlink():
            return None
        return cls.model_validate_json(path.read_text())

    def error(self) -> str | None:
        """One line for ``metrics.json`` when final_model was not handed over."""
        if self.status == "rejected":
            return f"final_model rejected by the collect hook: {self.reason}"
        return None


def size_cap(base_model: Path, factor: float) -> int:
    """The cap on final_model: ``factor`` times the base model's size, plus the slack."""
    base = measure(
        base_model.resolve(), remove_special=False
    )  # the trusted base may be a link (cache volume)
    return int(factor * base.apparent_bytes) + SIZE_SLACK_BYTES


def measure(root: Path, remove_special: bool = True) -> TreeSize:
    """Sizes of the tree at ``root``; with ``remove_special``, entries that are not
    directories or regular files are unlinked (and listed)."""
    size = TreeSize()
    fd = os.open(root, DIR_FLAGS)
    try:
        _measure_level(fd, "", size, remove_special, 0)
    finally:
        os.close(fd)
    return size


class Unmeasurable(ValueError):
    """A tree nested too deep to measure."""


def _measure_level(fd: int, shown: str, size: TreeSize, remove_special: bool, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Unmeasurable(f"{shown} is nested deeper than {MAX_DEPTH} directories")
    with os.scandir(fd) as listing:
        names = [entry.name for entry in listing]
    for name in names:
        where = f"{shown}{name}"
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        size.allocated_bytes += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):
            below = os.open(name, DIR_FLAGS, dir_fd=fd)
            try:
                _measure_level(below, f"{where}/", size, remove_special, depth + 1)
            finally:
                os.close(below)
        elif stat.S_ISREG(st.st_mode):
            size.apparent_bytes += st.st_size
            size.files += 1
        elif remove_special:
            os.unlink(name, dir_fd=fd)
            if len(size.removed) < MAX_LISTED:
                size.removed.append(where)


def _over_cap(size: TreeSize, cap: int, factor: float) -> str | None:
    if max(size.apparent_bytes, size.allocated_bytes) > cap:
        return (
            f"{size.apparent_bytes} bytes ({size.allocated_bytes} allocated) is over the cap of "
            f"{cap} bytes ({factor:g} x the base model's size + {SIZE_SLACK_BYTES} bytes)"
        )
    if size.files > MAX_FINAL_MODEL_FILES:
        return f"{size.files} files is over the cap of {MAX_FINAL_MODEL_FILES}"
    return None


def _measured_problem(root: Path, cap: int, factor: float) -> str | None:
    try:
        return _over_cap(measure(root), cap, factor)
    except Unmeasurable as exc:
        return str(exc)


def _clear(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def hand_over(
    app: Path,
    out: Path,
    base_model: Path,
    factor: float,
    handoff_dir: Path | None = None,
    agent_survivors: int = 0,
) -> Handoff:
    """Hand final_model over (or say why not); the record for ``handoff.json``."""
    source = app / FINAL_MODEL
    try:
        cap = size_cap(base_model, factor)
    except OSError as exc:  # no cap to check against: nothing is handed over unchecked
        return Handoff(
            status="rejected" if os.path.lexists(source) else "missing",
            reason=f"cannot size the cap from the base model: {exc}",
            agent_survivors=agent_survivors,
        )
    record = Handoff(status="missing", cap_bytes=cap, agent_survivors=agent_survivors)
    try:
        st = os.lstat(source)
    except FileNotFoundError:
        return record.model_copy(update={"reason": f"no {source}"})
    if not stat.S_ISDIR(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
        return record.model_copy(update={"status": "rejected", "reason": f"{source} is {kind}"})
    target = out / FINAL_MODEL
    placed: Path | None = target
    status = "collected"
    if handoff_dir is None:
        try:
            os.rename(source, target)  # the entry itself: moved, never followed
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            placed = None
    else:
        placed, status = None, "on_volume"
    refused: list[str] = []
    if placed is None:  # another filesystem: measure first, then a copy that follows no link
        problem = _measured_problem(source, cap, factor)
        if problem is not None:
            shutil.rmtree(source, ignore_errors=True)
            return record.model_copy(update={"status": "rejected", "reason": problem})
        if handoff_dir is not None:
            _clear(handoff_dir)
        placed = (handoff_dir or out) / FINAL_MODEL
        budget = CopyBudget(max_bytes=cap, max_files=MAX_FINAL_MODEL_FILES)
        with SafeDir.open(app, hard_links_ok=True) as safe:
            safe.copy_tree(FINAL_MODEL, placed, budget)
        refused = budget.refusal_lines()
        shutil.rmtree(source, ignore_errors=True)
    try:
        size = measure(placed)
    except Unmeasurable as exc:
        shutil.rmtree(placed, ignore_errors=True)
        return record.model_copy(update={"status": "rejected", "reason": str(exc)})
    size.removed = (size.removed + refused)[:MAX_LISTED]
    problem = _over_cap(size, cap, factor)
    if problem is not None:
        shutil.rmtree(placed, ignore_errors=True)
        return record.model_copy(update={"status": "rejected", "reason": problem, "size": size})
    if status == "on_volume":
        (out / ON_VOLUME_FILE).write_text(f"{placed}\n")
    return record.model_copy(update={"status": status, "size": size})


def copy_agent_logs(logs: Path, out: Path) -> list[str]:
    """Copy the agent's logs to ``out/agent_logs`` (no link followed, capped); the refusals."""
    target = out / AGENT_LOGS
    if not logs.is_dir():
        return [f"{logs}: not a directory"]
    budget = CopyBudget(max_bytes=AGENT_LOGS_MAX_BYTES, max_files=AGENT_LOGS_MAX_FILES)
    with SafeDir.open(logs, hard_links_ok=True) as safe:
        safe.copy_tree("", target, budget)
    return budget.refusal_lines()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (the collect hook)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", type=Path, default=Path(MODEL_LAYOUT.workspace))
    parser.add_argument("--logs", type=Path, default=Path(MODEL_LAYOUT.agent_logs))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--base-model", type=Path, required=True)
    parser.add_argument("--size-factor", type=float, default=DEFAULT_SIZE_FACTOR)
    parser.add_argument("--handoff-dir", type=Path, default=None)
    parser.add_argument("--agent-survivors", type=int, default=0)
    args = parser.parse_args(argv)
    out_st = os.lstat(args.out)
    if not stat.S_ISDIR(out_st.st_mode) or out_st.st_uid != os.getuid():
        raise SystemExit(f"error: {args.out} is not a directory of this user's")
    for name in (FINAL_MODEL, AGENT_LOGS, HANDOFF_FILE, ON_VOLUME_FILE):
        path = args.out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
    handoff = hand_over(
        args.app,
        args.out,
        args.base_model,
        args.size_factor,
        args.handoff_dir,
        args.agent_survivors,
    )
    handoff.agent_logs_refused = copy_agent_logs(args.logs, args.out)[:MAX_LISTED]
    handoff.write(args.out)
    print(
        f"handoff: final_model {handoff.status}"
        + (f" ({handoff.reason})" if handoff.reason else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
