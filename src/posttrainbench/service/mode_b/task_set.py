"""Mode B's dataset: Harbor task directories under ``tasks/`` and split files of task names.

A split is ``<split>.txt`` (one ``org/name`` a line; blank lines and ``#`` comments are
skipped) or ``<split>.jsonl`` (lines ``{"id": "org/name"}``). A task's name is the
``[task] name`` of its ``task.toml``. Names match exactly: a split id that names no task,
or a name two tasks share, is a config error (never a glob, prefix or fuzzy match).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.service.shared.errors import AgentTaskConfigError

TASKS_DIR = "tasks"


class TaskSample(BaseModel):
    """One sample of a Mode B split: a task name and the task's directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    path: Path


def _task_name(task_dir: Path) -> str:
    from harbor.models.task.config import TaskConfig

    path = task_dir / "task.toml"
    try:
        config = TaskConfig.model_validate_toml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AgentTaskConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except (ValidationError, ValueError) as exc:
        raise AgentTaskConfigError(
            f"{path}: not a valid Harbor task.toml: {str(exc).splitlines()[0]}"
        ) from None
    if config.task is None:
        raise AgentTaskConfigError(
            f'{path}: needs a [task] section with name = "org/name" (the sample id)'
        )
    return str(config.task.name)


def discover_tasks(dataset_dir: Path) -> dict[str, Path]:
    """Every task under ``<dataset_dir>/tasks``, by its exact ``org/name``; two tasks with one name is an error."""
    root = Path(dataset_dir) / TASKS_DIR
    if not root.is_dir():
        raise AgentTaskConfigError(f"{root}: Mode B needs a directory of Harbor task dirs here")
    found: dict[str, Path] = {}
    for task_dir in sorted(p for p in root.iterdir() if (p / "task.toml").is_file()):
        name = _task_name(task_dir)
        if name in found:
            raise AgentTaskConfigError(
                f"task name {name!r} is used by both {found[name]} and {task_dir}"
            )
        found[name] = task_dir.resolve()
    return found


def split_file(dataset_dir: Path, split: str) -> Path:
    """The split's file (``.txt`` before ``.jsonl``); missing or both present is an error."""
    candidates = [Path(dataset_dir) / f"{split}{ext}" for ext in (".txt", ".jsonl")]
    present = [p for p in candidates if p.is_file()]
    if not present:
        raise AgentTaskConfigError(
            f"split {split!r}: neither {candidates[0]} nor {candidates[1]} exists"
        )
    if len(present) > 1:
        raise AgentTaskConfigError(
            f"split {split!r}: both {present[0].name} and {present[1].name} exist"
        )
    return present[0]


def read_split_ids(path: Path) -> list[str]:
    """The task names one split file lists, in order; a duplicate is an error."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AgentTaskConfigError(f"{path}: cannot read: {exc.strerror}") from None
    ids: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or (path.suffix == ".txt" and text.startswith("#")):
            continue
        if path.suffix == ".jsonl":
            try:
                item = json.loads(text)
            except json.JSONDecodeError as exc:
                raise AgentTaskConfigError(f"{path}:{number}: {exc.msg}") from None
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise AgentTaskConfigError(
                    f"{path}:{number}: needs a string field id (a task name)"
                )
            text = item["id"]
        if text in ids:
            raise AgentTaskConfigError(f"{path}:{number}: duplicate task {text!r}")
        ids.append(text)
    if not ids:
        raise AgentTaskConfigError(f"{path}: the split is empty")
    return ids


def match_exactly(ids: list[str], tasks: dict[str, Path], source: str) -> list[TaskSample]:
    """Each id to the task of exactly that name; any id without one is an error naming it."""
    unknown = [i for i in ids if i not in tasks]
    if unknown:
        hint = (
            f" (known: {', '.join(sorted(tasks)[:5])}{', ...' if len(tasks) > 5 else ''})"
            if tasks
            else ""
        )
        raise AgentTaskConfigError(
            f"{source}: no task is named exactly {', '.join(repr(u) for u in unknown[:5])}{hint}"
        )
    return [TaskSample(name=i, path=tasks[i]) for i in ids]


def load_task_split(dataset_dir: Path, split: str) -> list[TaskSample]:
    """The tasks of *split*, in the split file's order."""
    path = split_file(dataset_dir, split)
    return match_exactly(read_split_ids(path), discover_tasks(dataset_dir), str(path))


def copy_task_splits(source: Path, dest: Path, splits: list[str]) -> None:
    """Copy *splits* and only the tasks they list into *dest* (the service's own copy; kept if present)."""
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for split in splits:
        path = split_file(source, split)
        if (dest / path.name).exists():
            continue
        for sample in load_task_split(source, split):
            target = dest / TASKS_DIR / sample.path.name
            if not target.exists():
                shutil.copytree(sample.path, target, symlinks=True)
        shutil.copyfile(path, dest / path.name)  # last: a split file means its tasks are all here
