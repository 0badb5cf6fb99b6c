"""Dataset splits of an agent task: ``<split>.jsonl`` files, lines ``{"id", "question", "answer"}``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.service.shared.errors import AgentTaskConfigError

if TYPE_CHECKING:
    from posttrainbench.service.shared.config import AgentTaskConfig


class Sample(BaseModel):
    """One question with its reference answer."""

    model_config = ConfigDict(extra="ignore")

    id: str
    question: str
    answer: str


def split_path(dataset_dir: Path, split: str) -> Path:
    """Where *split* lives inside *dataset_dir*."""
    return Path(dataset_dir) / f"{split}.jsonl"


def load_split(dataset_dir: Path, split: str) -> list[Sample]:
    """Read one split; a missing file, a bad line or a duplicate id is one clear error."""
    path = split_path(dataset_dir, split)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AgentTaskConfigError(f"{path}: cannot read split {split!r}: {exc.strerror}") from None
    samples: list[Sample] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if (
                isinstance(raw, dict)
                and not isinstance(raw.get("answer"), str)
                and raw.get("answer") is not None
            ):
                raw["answer"] = str(raw["answer"])  # numbers are fine as answers
            sample = Sample.model_validate(raw)
        except (json.JSONDecodeError, ValidationError) as exc:
            reason = (
                exc.msg
                if isinstance(exc, json.JSONDecodeError)
                else "needs string fields id, question, answer"
            )
            raise AgentTaskConfigError(f"{path}:{number}: {reason}") from None
        if sample.id in seen:
            raise AgentTaskConfigError(f"{path}:{number}: duplicate id {sample.id!r}")
        seen.add(sample.id)
        samples.append(sample)
    if not samples:
        raise AgentTaskConfigError(f"{path}: split {split!r} is empty")
    return samples


def named_splits(config: AgentTaskConfig) -> list[str]:
    """Every split the config refers to (listed, selection and reward targets)."""
    names = list(config.splits)
    extra = [config.reward.selection_split] + [t.split for t in config.reward.targets]
    return names + [n for n in dict.fromkeys(extra) if n and n not in names]


def check_dataset(config: AgentTaskConfig) -> dict[str, int]:
    """Check the baseline and every named split; return the split sizes."""
    if not config.baseline.is_dir():
        raise AgentTaskConfigError(f"baseline {config.baseline} is not a directory")
    sizes = {split: len(load_split(config.dataset, split)) for split in named_splits(config)}
    for split, policy in config.splits.items():
        if policy.tier == "aggregate" and policy.min_samples > sizes[split]:
            raise AgentTaskConfigError(
                f"split {split!r}: min_samples {policy.min_samples} exceeds its {sizes[split]} samples"
            )
    return sizes


def copy_splits(config: AgentTaskConfig, dest: Path, splits: list[str]) -> None:
    """Copy *splits* (only those) into *dest*, keeping files already there (the service's own copy)."""
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for split in splits:
        target = split_path(dest, split)
        if not target.exists():
            load_split(config.dataset, split)  # validate before taking it
            shutil.copyfile(split_path(config.dataset, split), target)
