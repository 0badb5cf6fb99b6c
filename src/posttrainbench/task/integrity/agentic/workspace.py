"""The judge's workspace: what PostTrainBench's ``run_judge.sh`` puts in its job dir.

::

    <workspace>/                    /home/judge in the sandbox (read-only there)
        task/                       the agent's files: its code snapshot and data files
        solve_parsed.txt            the agent's trace (parsed_trace.py)
        contamination_check.py      PostTrainBench's tool, pinned (templates/)
        test_data.json              the sealed test set, in its TEST.json format
        model_identity_check.py     PostTrainBench's tool, pinned (templates/)
        reference_configs/          its reference config.json of each base model
        final_model_config.json     final_model/config.json, when there is one

Everything is a fresh copy made here: plain files and directories only (a link is left
out, never followed), within byte and file caps, from the verifier's artifacts and its
sealed data. Nothing of the verifier's environment, no path of the machine and no
secret is written into it; ``task/`` is the only directory the judge may write to.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from posttrainbench.core.safe_fs import CopyBudget, SafeDir
from posttrainbench.task.integrity.agentic.parsed_trace import render_parsed
from posttrainbench.task.integrity.agentic.verdicts import JUDGEMENT_NAME
from posttrainbench.task.integrity.traces.events import NormalizedTrace

DATA = Path(__file__).resolve().parent / "templates"
TOOLS = ("contamination_check.py", "model_identity_check.py")
TRACE_NAME = "solve_parsed.txt"
TEST_DATA_NAME = "test_data.json"
FINAL_CONFIG_NAME = "final_model_config.json"
TASK_MAX_BYTES = 2 * 2**30
TASK_MAX_FILES = 20_000
CONFIG_MAX_BYTES = 1 * 2**20


@dataclass
class WorkspaceSources:
    """Where the workspace's contents come from (any may be missing)."""

    code_snapshot: Path | None = None
    data_files: Path | None = None
    final_model: Path | None = None
    test_items: list[dict] | None = None
    traces: list[NormalizedTrace] = field(default_factory=list)


@dataclass
class Workspace:
    """An assembled workspace and what was left out of it."""

    root: Path
    left_out: list[str] = field(default_factory=list)

    @property
    def task(self) -> Path:
        return self.root / "task"


def _copy_tree(source: Path, dest: Path, budget: CopyBudget) -> None:
    with SafeDir.open(source) as root:
        root.copy_tree("", dest, budget)


def _merge(extra: Path, into: Path) -> None:
    """Move *extra*'s entries into *into* where nothing has their name yet."""
    for entry in sorted(extra.iterdir()):
        target = into / entry.name
        if not target.exists():
            os.rename(entry, target)
        elif entry.is_dir() and target.is_dir() and not target.is_symlink():
            _merge(entry, target)


def _write(path: Path, data: bytes | str) -> None:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    os.chmod(path, 0o644)


def assemble(sources: WorkspaceSources, root: Path) -> Workspace:
    """Build the workspace in the new directory *root*."""
    import json

    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    ws = Workspace(root=root)
    budget = CopyBudget(max_bytes=TASK_MAX_BYTES, max_files=TASK_MAX_FILES)
    if sources.code_snapshot is not None and sources.code_snapshot.is_dir():
        _copy_tree(sources.code_snapshot, ws.task, budget)
    else:
        ws.task.mkdir(mode=0o755)
    if sources.data_files is not None and sources.data_files.is_dir():
        staging = root / ".data_files"
        _copy_tree(sources.data_files, staging, budget)
        _merge(staging, ws.task)
        shutil.rmtree(staging)
    ws.left_out += budget.refusal_lines()
    # As run_judge.sh: no stale judgement.json can stand as this judge's verdict.
    stale = ws.task / JUDGEMENT_NAME
    if stale.is_symlink() or stale.is_file():
        stale.unlink()
    elif stale.exists():
        shutil.rmtree(stale)
    _write(root / TRACE_NAME, render_parsed(sources.traces))
    for tool in TOOLS:  # kept as .txt in the package: PostTrainBench's files, not ours
        _write(root / tool, (DATA / f"{tool}.txt").read_bytes())
    shutil.copytree(DATA / "reference_configs", root / "reference_configs")
    if sources.test_items is not None:
        _write(root / TEST_DATA_NAME, json.dumps(sources.test_items, ensure_ascii=False))
    if sources.final_model is not None:
        try:
            with SafeDir.open(sources.final_model) as model:
                if model.lstat("config.json") is not None:
                    _write(
                        root / FINAL_CONFIG_NAME, model.read_bytes("config.json", CONFIG_MAX_BYTES)
                    )
        except OSError as exc:
            ws.left_out.append(f"final_model/config.json: {exc.strerror or exc}")
    return ws


def read_judgement(ws: Workspace, max_bytes: int) -> bytes | None:
    """The judge's ``task/judgement.json`` (no link followed), or None when absent."""
    with SafeDir.open(ws.task) as task:
        if task.lstat(JUDGEMENT_NAME) is None:
            return None
        return task.read_bytes(JUDGEMENT_NAME, max_bytes)


def reset_task(ws: Workspace) -> None:
    """Remove the judgement a judge left, so that the next one starts fresh."""
    path = ws.task / JUDGEMENT_NAME
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
