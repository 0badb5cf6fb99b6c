"""Mode A or Mode B, chosen by ``config.scoring.mode``: the one place the service and the
final scoring ask how to read a split, copy it and score a candidate on it, and so where
a config is loaded with its dataset checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from posttrainbench.service.mode_a.scorer import ScoreReport, score_copy
from posttrainbench.service.mode_b import task_set
from posttrainbench.service.shared import dataset
from posttrainbench.service.shared.candidates import ArchiveSource
from posttrainbench.service.shared.config import (
    AgentTaskConfig,
    ScoringModeA,
    ScoringModeB,
    Tier,
    parse_config,
)
from posttrainbench.service.shared.dataset import Sample
from posttrainbench.service.shared.errors import AgentTaskConfigError
from posttrainbench.service.shared.identity import IdentityPool


def check_scoring_dataset(config: AgentTaskConfig) -> dict[str, int]:
    """Check the baseline and every split the config names; return the split sizes."""
    if isinstance(config.scoring, ScoringModeA):
        return dataset.check_dataset(config)
    if not config.baseline.is_dir():
        raise AgentTaskConfigError(f"baseline {config.baseline} is not a directory")
    sizes = {
        split: len(task_set.load_task_split(config.dataset, split))
        for split in dataset.named_splits(config)
    }
    for split, policy in config.splits.items():
        if policy.tier == Tier.AGGREGATE and policy.min_samples > sizes[split]:
            raise AgentTaskConfigError(
                f"split {split!r}: min_samples {policy.min_samples} exceeds its {sizes[split]} tasks"
            )
    return sizes


def load_config(path: Path, check_dataset: bool = True) -> AgentTaskConfig:
    """Read, validate and resolve an agent-task YAML config; errors are one line.

    With *check_dataset*, the baseline and every split the config names must exist and
    parse (see ``posttrainbench.service.shared.dataset``).
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AgentTaskConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise AgentTaskConfigError(
            f"{path}: not valid YAML: {' '.join(str(exc).split())}"
        ) from None
    config = parse_config(data, path.parent, str(path))
    if check_dataset:
        check_scoring_dataset(config)
    return config


def load_samples(config: AgentTaskConfig, dataset_dir: Path, split: str) -> list[Sample]:
    """The split's samples; in Mode B one per task, its id the task's exact ``org/name``."""
    if isinstance(config.scoring, ScoringModeA):
        return dataset.load_split(dataset_dir, split)
    # A task carries no question/answer text: the nested Harbor run and its verifier hold them.
    return [
        Sample(id=t.name, question="", answer="")
        for t in task_set.load_task_split(dataset_dir, split)
    ]


def copy_evaluable(config: AgentTaskConfig, dest: Path, splits: list[str]) -> None:
    """Copy *splits* (only those, and in Mode B only their tasks) into the service's *dest*."""
    if isinstance(config.scoring, ScoringModeA):
        dataset.copy_splits(config, dest, splits)
    else:
        task_set.copy_task_splits(config.dataset, dest, splits)


def nested_root(state_dir: Path) -> Path:
    """Where Mode B keeps its nested jobs: beside the 0700 state dir, since the candidate
    user must reach its code and its private trial dirs there (jobs and tasks stay root's)."""
    state_dir = Path(state_dir)
    return state_dir.parent / f"{state_dir.name}.nested"


@dataclass(frozen=True)
class Containment:
    """Where untrusted runs get their identities and directories (see ``candidate_run``)."""

    pool: IdentityPool
    runs_root: Path


def score_candidate(
    config: AgentTaskConfig,
    source: ArchiveSource,
    samples: list[Sample],
    containment: Containment,
    *,
    dataset_dir: Path,
    label: str,
    split: str,
    nested_jobs: Path,
) -> ScoreReport:
    """Score the code of *source* on *samples* of *split*, by the config's scoring mode.

    Mode B runs (or resumes) the nested job of *label* on these tasks under *nested_jobs*.
    """
    scoring = config.scoring
    if isinstance(scoring, ScoringModeA):
        return score_copy(
            source,
            samples,
            scoring,
            config.timeouts,
            config.limits,
            containment.pool,
            containment.runs_root,
        )
    assert isinstance(scoring, ScoringModeB)
    from posttrainbench.service.mode_b.nested_harbor import run_nested

    wanted = {s.id for s in samples}
    tasks = [t for t in task_set.load_task_split(dataset_dir, split) if t.name in wanted]
    timeout_s = scoring.nested_timeout_s or config.timeouts.for_samples(len(tasks))
    return run_nested(
        nested_jobs,
        label,
        split,
        source,
        tasks,
        scoring,
        config.limits,
        containment.pool,
        timeout_s,
    )
