"""Copying a trial's files into its staged run: traces, code snapshot and (when asked) final_model.

The agent wrote every one of them, so each is copied through `safe_fs` (no link followed,
only real directories and plain single-name files, nothing sparse) under a cap per kind.
What was left out goes into the run's `refused_files` with why, and into one warning line.
"""

from __future__ import annotations

from pathlib import Path

from posttrainbench.copy_caps import CopyCaps
from posttrainbench.integrity.traces.trial_files import MAX_TRACE_BYTES
from posttrainbench.results.harbor_trial import TrialSource
from posttrainbench.results.trial_volumes import fetch_into
from posttrainbench.safe_fs import CopyBudget, Refused, SafeDir

TRACE_DIR = "trace"
SNAPSHOT_DIR = "snapshot"
FINAL_MODEL_DIR = "final_model"


def stage_run_files(
    staged: Path,
    source: TrialSource,
    trial_dir: Path,
    with_final_model: bool,
    caps: CopyCaps | None = None,
) -> list[str]:
    """Copy the run's files into *staged* and write its record; returns warning lines."""
    caps = caps or CopyCaps()
    record = source.record
    warnings: list[str] = []
    refused = list(record.refused_files)
    with SafeDir.open(trial_dir) as root:
        traces = CopyBudget(
            max_bytes=caps.trace_bytes, max_files=caps.trace_files, max_file_bytes=MAX_TRACE_BYTES
        )
        record.trace_files = []
        for i, relative in enumerate(source.traces):
            name = f"{i:02d}-{Path(relative).name}"
            (staged / TRACE_DIR).mkdir(exist_ok=True)
            if root.copy_file(relative, staged / TRACE_DIR, name, traces):
                record.trace_files.append(f"{TRACE_DIR}/{name}")
        refused += traces.refusal_lines()
        if source.snapshot is not None:
            refused += _copy_dir(
                root,
                source.snapshot,
                staged / SNAPSHOT_DIR,
                CopyBudget(max_bytes=caps.snapshot_bytes, max_files=caps.snapshot_files),
            )
            record.snapshot_dir = SNAPSHOT_DIR if (staged / SNAPSHOT_DIR).is_dir() else None
        if with_final_model and source.final_model is not None:
            refused += _copy_dir(
                root,
                source.final_model,
                staged / FINAL_MODEL_DIR,
                CopyBudget(max_bytes=caps.final_model_bytes, max_files=caps.final_model_files),
            )
        elif with_final_model:
            warning = fetch_into(trial_dir, staged)  # a cloud trial's model is on its volume
            if warning:
                warnings.append(warning)
    if (staged / FINAL_MODEL_DIR).is_dir():
        record.final_model_dir = FINAL_MODEL_DIR
    record.refused_files = refused
    if refused:
        warnings.append(
            f"{trial_dir}: {len(refused)} file(s) refused, neither read nor copied "
            f"(refused_files in its record.json); first: {refused[0]}"
        )
    record.write(staged)
    return warnings


def _copy_dir(root: SafeDir, relative: str, dest: Path, budget: CopyBudget) -> list[str]:
    try:
        root.copy_tree(relative, dest, budget)
    except Refused as exc:  # the directory itself was swapped for a link since it was read
        budget.refuse(exc)
    except (FileNotFoundError, NotADirectoryError):
        budget.refuse(Refused(relative, "removed or replaced during the export"))
    return budget.refusal_lines()
