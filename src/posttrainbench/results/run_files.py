"""Copying a trial's files into its staged run: traces, code snapshot and (when asked) final_model.

The agent wrote every one of them, so each is copied through `safe_fs` (no link followed,
only real directories and plain single-name files, nothing sparse) under a cap per kind. A
trace the trace scan already read whole through `safe_fs` is stored from those bytes
(`write_read`), so what the store keeps is what was checked, and the file is read once.
What was left out goes into the run's `refused_files` with why, and into one warning line.
"""

from __future__ import annotations

from pathlib import Path

from posttrainbench.copy_caps import CopyCaps
from posttrainbench.integrity.traces.trial_files import MAX_TRACE_BYTES
from posttrainbench.results.harbor_trial import TrialSource
from posttrainbench.results.trial_volumes import fetch_into
from posttrainbench.safe_fs import CopyBudget, Refused, SafeDir, write_read

# Traces lie in the run directory itself, as `trace-00-<name>` (best first): a `trace/`
# directory per run cost one more mkdir, the dearest operation of a store write here. Stores
# written before name `trace/00-<name>` in their records; readers take the record's path.
TRACE_PREFIX = "trace-"
SNAPSHOT_DIR = "snapshot"
FINAL_MODEL_DIR = "final_model"
AGENT_LOG_FILE = "agent-log.txt"
AGENT_LOG_BYTES = 256 * 1024  # the head is what a reader looks at; the trial keeps the rest


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
            name = f"{TRACE_PREFIX}{i:02d}-{Path(relative).name}"
            read = source.trace_reads.get(relative)
            # A trace the scan read whole is stored from those bytes (one read per trace);
            # a larger one is copied from the trial, through the same checks.
            if (
                write_read(read, staged, name, traces)
                if read is not None
                else root.copy_file(relative, staged, name, traces)
            ):
                record.trace_files.append(name)
        refused += traces.refusal_lines()
        if source.agent_log is not None:
            record.agent_log = _keep_log_head(root, source.agent_log, staged, refused)
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


def _keep_log_head(root: SafeDir, relative: str, staged: Path, refused: list[str]) -> str | None:
    """The first AGENT_LOG_BYTES of the agent's plain log (a link or special file refused)."""
    try:
        read = root.read_file(relative, AGENT_LOG_BYTES)
    except Refused as exc:
        refused.append(str(exc))
        return None
    except OSError:
        return None
    (staged / AGENT_LOG_FILE).write_bytes(read.data)
    return AGENT_LOG_FILE


def _copy_dir(root: SafeDir, relative: str, dest: Path, budget: CopyBudget) -> list[str]:
    try:
        root.copy_tree(relative, dest, budget)
    except Refused as exc:  # the directory itself was swapped for a link since it was read
        budget.refuse(exc)
    except (FileNotFoundError, NotADirectoryError):
        budget.refuse(Refused(relative, "removed or replaced during the export"))
    return budget.refusal_lines()
