"""Cloud trials' final_model volumes during an export: fetched into the store when asked,
and removed once the run is safely stored (unless asked to keep them)."""

from __future__ import annotations

import os
from pathlib import Path

from posttrainbench.host.envs.cloud_trial import RECORD_FILE, read_record
from posttrainbench.host.envs.cloud_volumes import (
    FINAL_MODEL,
    VolumeError,
    delete_volume,
    fetch_final_model,
)


def fetch_into(trial_dir: Path, staged: Path) -> str | None:
    """Copy final_model/ of a cloud trial from its volume into the staged run.

    Returns a warning line when it could not, None when it did or there is no volume.
    """
    record = read_record(trial_dir)
    if record is None or record.handoff_removed:
        return None
    try:
        fetch_final_model(record, staged / FINAL_MODEL)
    except VolumeError as exc:
        return f"{trial_dir}: final_model not copied: {exc}"
    return None


def is_cloud_trial(trial_dir: Path | str) -> bool:
    """Whether a trial ran in the cloud (its ptb-cloud.json exists): one stat, on a string
    path; most trials are not, and this runs for every trial an export stores."""
    return os.path.isfile(os.path.join(trial_dir, RECORD_FILE))


def release_volumes(
    stored: list[tuple[Path, Path]], *, keep: bool, with_final_model: bool
) -> tuple[list[str], list[str]]:
    """Remove the volumes of stored cloud trials: (volumes removed, warning lines).

    *stored* pairs each trial dir with its run dir in the store. A volume whose
    final_model was asked for but is not in the store is kept, so nothing is lost.
    """
    removed: list[str] = []
    warnings: list[str] = []
    for trial_dir, run_dir in stored:
        if not is_cloud_trial(trial_dir):
            continue
        try:
            record = read_record(trial_dir)
        except ValueError:
            warnings.append(
                f"{trial_dir}: unreadable ptb-cloud.json; its volume (if any) was not removed"
            )
            continue
        if record is None or record.handoff_removed or keep:
            continue
        if with_final_model and not (run_dir / FINAL_MODEL).is_dir():
            warnings.append(
                f"{trial_dir}: kept volume {record.handoff_volume}: its final_model is not in the store"
            )
            continue
        try:
            delete_volume(record)
        except VolumeError as exc:
            warnings.append(f"{trial_dir}: {exc}")
            continue
        record.handoff_removed = True
        record.write(trial_dir)
        removed.append(record.handoff_volume)
    return removed, warnings
