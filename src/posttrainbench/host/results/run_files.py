"""Copying a trial's files into its stored run: traces, code snapshot and (when asked) final_model.

A run's files are kept in memory (`MemorySink`) for the store's database, or written into
a staged run directory when its final_model is asked for (`DirSink`): a model is many large
files a rescore reads in place.

The agent wrote every one of them, so each is copied through `safe_fs` (no link followed,
only real directories and plain single-name files, nothing sparse) under a cap per kind. A
trace the trace scan already read whole through `safe_fs` is stored from those bytes
(`write_read`), so what the store keeps is what was checked, and the file is read once.
What was left out goes into the run's `refused_files` with why, and into one warning line.
"""

from __future__ import annotations

import os
from pathlib import Path

from posttrainbench.core.nofollow import Refused, read_fd
from posttrainbench.core.safe_fs import CopyBudget, CopySink, DirSink, SafeDir, write_read
from posttrainbench.host.copy_caps import CopyCaps
from posttrainbench.host.results.harbor_trial import TrialSource
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.trial_volumes import fetch_into
from posttrainbench.task.integrity.traces.trial_files import MAX_TRACE_BYTES

# Traces lie in the run directory itself, as `trace-00-<name>` (best first): a `trace/`
# directory per run cost one more mkdir, the dearest operation of a store write here. Stores
# written before name `trace/00-<name>` in their records; readers take the record's path.
TRACE_PREFIX = "trace-"
SNAPSHOT_DIR = "snapshot"
FINAL_MODEL_DIR = "final_model"
AGENT_LOG_FILE = "agent-log.txt"
AGENT_LOG_BYTES = 256 * 1024  # the head is what a reader looks at; the trial keeps the rest
SAMPLES_FILE = "samples.jsonl"
SAMPLES_BYTES = 8 * 1024 * 1024  # a few thousand questions' verdicts and completion heads


class MemorySink:
    """Copies into memory: each file's bytes under its relative name (the store's blobs)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def make_dir(self, relative: str) -> None:
        """Directories are implied by their files' names."""

    def put(self, relative: str, data: bytes, st: os.stat_result | None = None) -> None:
        """Store *data* as the file *relative*."""
        self.files[relative] = data

    def copy_from(self, relative: str, fd: int, st: os.stat_result) -> int:
        """Store what *fd* holds (at most its size when opened) as *relative*."""
        data = read_fd(fd, st.st_size)
        self.put(relative, data)
        return len(data)


def stage_run_files(
    sink: CopySink,
    source: TrialSource,
    root: SafeDir,
    trial_dir: Path | str,
    with_final_model: bool = False,
    caps: CopyCaps | None = None,
) -> tuple[ResultRecord, list[str]]:
    """Copy the run's files from the trial directory *root* (at *trial_dir*) into *sink* (a
    final_model only into a `DirSink`); returns its record, completed with what was stored
    and refused, and warning lines."""
    caps = caps or CopyCaps()
    record = source.record
    warnings: list[str] = []
    refused = list(record.refused_files)
    traces = CopyBudget(
        max_bytes=caps.trace_bytes, max_files=caps.trace_files, max_file_bytes=MAX_TRACE_BYTES
    )
    record.trace_files = []
    for i, relative in enumerate(source.traces):
        name = f"{TRACE_PREFIX}{i:02d}-{relative.rpartition('/')[2]}"  # the scan's "/" paths
        read = source.trace_reads.get(relative)
        # A trace the scan read whole is stored from those bytes (one read per trace);
        # a larger one is copied from the trial, through the same checks.
        if (
            write_read(read, sink, name, traces)
            if read is not None
            else root.copy_file(relative, sink, name, traces)
        ):
            record.trace_files.append(name)
    refused += traces.refusal_lines()
    if source.agent_log is not None:
        record.agent_log = _keep_head(
            root, source.agent_log, sink, AGENT_LOG_FILE, AGENT_LOG_BYTES, refused
        )
    if source.samples is not None:
        record.samples_file = _keep_head(
            root, source.samples, sink, SAMPLES_FILE, SAMPLES_BYTES, refused
        )
    if source.snapshot is not None:
        copied, lines = _copy_dir(
            root,
            source.snapshot,
            sink,
            SNAPSHOT_DIR,
            CopyBudget(max_bytes=caps.snapshot_bytes, max_files=caps.snapshot_files),
        )
        refused += lines
        record.snapshot_dir = SNAPSHOT_DIR if copied else None
    if with_final_model and isinstance(sink, DirSink):
        if source.final_model is not None:
            copied, lines = _copy_dir(
                root,
                source.final_model,
                sink,
                FINAL_MODEL_DIR,
                CopyBudget(max_bytes=caps.final_model_bytes, max_files=caps.final_model_files),
            )
            refused += lines
        else:
            warning = fetch_into(
                Path(trial_dir), sink.path
            )  # a cloud trial's model is on its volume
            if warning:
                warnings.append(warning)
        if (sink.path / FINAL_MODEL_DIR).is_dir():
            record.final_model_dir = FINAL_MODEL_DIR
    record.refused_files = refused
    if refused:
        warnings.append(
            f"{trial_dir}: {len(refused)} file(s) refused, neither read nor copied "
            f"(refused_files in its record); first: {refused[0]}"
        )
    return record, warnings


def _keep_head(
    root: SafeDir, relative: str, sink: CopySink, name: str, limit: int, refused: list[str]
) -> str | None:
    """The first *limit* bytes of a trial's file, stored as *name* (a link or special file
    refused): the agent's plain log, the verifier's per-question results."""
    try:
        read = root.read_file(relative, limit)
    except Refused as exc:
        refused.append(str(exc))
        return None
    except OSError:
        return None
    sink.put(name, read.data)
    return name


def _copy_dir(
    root: SafeDir, relative: str, sink: CopySink, target: str, budget: CopyBudget
) -> tuple[bool, list[str]]:
    """Copy a directory of the trial to *target* in *sink*: (whether it was, refusal lines)."""
    try:
        root.copy_tree(relative, sink, budget, target=target)
    except Refused as exc:  # the directory itself was swapped for a link since it was read
        budget.refuse(exc)
    except (FileNotFoundError, NotADirectoryError):
        budget.refuse(Refused(relative, "removed or replaced during the export"))
    else:
        return True, budget.refusal_lines()
    return False, budget.refusal_lines()
