"""An export reads each small trace once: the trace scan's read is what the store keeps.

The agent controls the trace file and may change it between the scan and the store write
(a program it left running). Whatever it does then, the store holds the bytes that were
read through `safe_fs` (after the link, kind, hard-link and size checks), never what the
name points to later, and nothing of the host.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from posttrainbench.core.nofollow import Refused
from posttrainbench.core.safe_fs import CopyBudget, SafeDir, write_read
from posttrainbench.host.results import export as export_module
from posttrainbench.host.results.export import export
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.task.integrity.traces.trial_files import SNIFF_BYTES
from tests.results_fixtures import TrialSpec, stored_file, write_trial
from tests.security.planting import files_containing, links_under, make_canary


def _export_with(tmp_path: Path, after_read, prepare=None) -> tuple[Path, object]:
    """Export one trial (*prepare(trial)* first), calling *after_read(trial)* between the
    read and the store write."""
    trial = write_trial(tmp_path / "jobs" / "job", TrialSpec())
    if prepare is not None:
        prepare(trial)
    real_read = export_module.read_trial_at

    def read_then_tamper(*args, **kwargs):
        source = real_read(*args, **kwargs)
        after_read(trial)
        return source

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(export_module, "read_trial_at", read_then_tamper)
    try:
        summary = export([tmp_path / "jobs"], tmp_path / "res", workers=1)
    finally:
        monkeypatch.undo()
    assert len(summary.added) == 1, summary
    (record,) = ResultsStore.open(tmp_path / "res", create=False).load()[0]
    return tmp_path / "res", record


def test_a_trace_swapped_for_a_host_link_after_the_scan_is_stored_as_read(tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "host")
    kept: dict[str, bytes] = {}

    def swap(trial: Path) -> None:
        trace = trial / "agent" / "claude-code.txt"
        kept["bytes"] = trace.read_bytes()
        trace.unlink()
        trace.symlink_to(canary.file)

    res, record = _export_with(tmp_path, swap)
    assert record.trace_files
    assert stored_file(res, record, record.trace_files[0]) == kept["bytes"]
    assert files_containing(tmp_path / "res", canary.text) == []
    assert links_under(tmp_path / "res") == []


def test_a_trace_rewritten_after_the_scan_is_stored_as_read(tmp_path: Path) -> None:
    kept: dict[str, bytes] = {}

    def rewrite(trial: Path) -> None:
        trace = trial / "agent" / "claude-code.txt"
        kept["bytes"] = trace.read_bytes()
        trace.write_text("rewritten after the scan\n" * 10)

    res, record = _export_with(tmp_path, rewrite)
    assert stored_file(res, record, record.trace_files[0]) == kept["bytes"]


@pytest.mark.timeout(20)
def test_a_trace_swapped_for_a_fifo_after_the_scan_never_blocks(tmp_path: Path) -> None:
    def fifo(trial: Path) -> None:
        trace = trial / "agent" / "claude-code.txt"
        trace.unlink()
        os.mkfifo(trace)

    res, record = _export_with(tmp_path, fifo)  # no open of the FIFO: nothing blocks
    assert record.trace_files and stored_file(res, record, record.trace_files[0])


def test_a_trace_over_the_sniff_size_is_copied_and_still_checked(tmp_path: Path) -> None:
    """A trace larger than what the scan reads whole is copied from the trial again, through
    the same checks: swapped for a link in between, it is refused, not followed."""
    canary = make_canary(tmp_path / "host")
    line = json.dumps({"type": "assistant", "message": {"role": "assistant", "content": []}})
    big = (line + "\n") * (SNIFF_BYTES // len(line) + 10)

    def link(trial: Path) -> None:
        trace = trial / "agent" / "claude-code.txt"
        trace.unlink()
        trace.symlink_to(canary.file)

    trial = write_trial(tmp_path / "plain" / "job", TrialSpec())
    (trial / "agent" / "claude-code.txt").write_text(big)
    export([tmp_path / "plain"], tmp_path / "plain-res", workers=1)
    (record,) = ResultsStore.open(tmp_path / "plain-res", create=False).load()[0]
    stored = stored_file(tmp_path / "plain-res", record, record.trace_files[0])
    assert stored.decode() == big  # copied whole, not the scan's head

    def make_big(trial: Path) -> None:
        (trial / "agent" / "claude-code.txt").write_text(big)

    _, record = _export_with(tmp_path, link, prepare=make_big)
    assert record.trace_files == []  # the copy saw the link and refused it
    assert any("claude-code.txt: a symbolic link" in line for line in record.refused_files)
    assert files_containing(tmp_path / "res", canary.text) == []


def test_write_read_keeps_the_copy_caps_mode_and_mtime(tmp_path: Path) -> None:
    trial, out = tmp_path / "trial", tmp_path / "out"
    trial.mkdir()
    out.mkdir()
    for name, size in (("a.txt", 10), ("b.txt", 20), ("c.txt", 30), ("d.txt", 5)):
        (trial / name).write_bytes(b"x" * size)
    os.chmod(trial / "a.txt", 0o755)
    os.utime(trial / "a.txt", ns=(1_000_000_000, 2_000_000_000))
    budget = CopyBudget(max_bytes=45, max_files=3, max_file_bytes=25)
    with SafeDir.open(trial) as root:
        reads = {n: root.read_file(n, 1000) for n in ("a.txt", "b.txt", "c.txt", "d.txt")}
        assert write_read(reads["a.txt"], out, "a", budget)
        assert write_read(reads["b.txt"], out, "b", budget)
        assert not write_read(reads["c.txt"], out, "c", budget)  # over the per-file cap
        assert write_read(reads["d.txt"], out, "d", budget)
        assert not write_read(reads["d.txt"], out, "e", budget)  # over the file-count cap
        head = root.read_file("c.txt", 10)
        with pytest.raises(ValueError, match="not read whole"):
            write_read(head, out, "f", CopyBudget(max_bytes=100, max_files=10))
    assert sorted(p.name for p in out.iterdir()) == ["a", "b", "d"]
    assert (out / "a").read_bytes() == b"x" * 10 and (out / "a").stat().st_mode & 0o777 == 0o755
    assert (out / "a").stat().st_mtime_ns == 2_000_000_000
    assert (out / "b").stat().st_mode & 0o777 == 0o644
    assert budget.files == 3 and budget.bytes == 35
    assert [line.split(": ", 1)[0] for line in budget.refused] == ["c.txt", "d.txt"]


def test_write_read_never_writes_through_an_existing_name(tmp_path: Path) -> None:
    """The store side: a name already there (a link planted in the staging dir) is an error,
    never written through."""
    canary = make_canary(tmp_path / "host")
    trial, out = tmp_path / "trial", tmp_path / "out"
    trial.mkdir()
    out.mkdir()
    (trial / "t.txt").write_text("trace\n")
    (out / "t").symlink_to(canary.file)
    with SafeDir.open(trial) as root:
        read = root.read_file("t.txt", 1000)
    with pytest.raises(FileExistsError):
        write_read(read, out, "t", CopyBudget(max_bytes=100, max_files=10))
    assert canary.text in canary.file.read_text()


def test_read_file_refuses_what_read_head_refuses(tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "host")
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "link.txt").symlink_to(canary.file)
    os.link(canary.file, tmp_path / "trial" / "hard.txt")
    with SafeDir.open(tmp_path / "trial") as root:
        with pytest.raises(Refused, match="a symbolic link"):
            root.read_file("link.txt", 1000)
        with pytest.raises(Refused, match="a hard link"):
            root.read_file("hard.txt", 1000)
        with pytest.raises(Refused, match="not a path inside"):
            root.read_file("../host/host_secret.txt", 1000)
        with pytest.raises(Refused, match="not a path inside"):
            root.read_file(str(canary.file), 1000)


def test_a_scan_keeps_only_so_much_and_the_rest_is_copied(tmp_path: Path, monkeypatch) -> None:
    """Thousands of session traces would hold their bytes in memory until stored: past
    MAX_KEPT_BYTES the scan keeps none, and those traces are copied from the trial instead."""
    from posttrainbench.task.integrity.traces import trial_files

    trial = write_trial(tmp_path / "jobs" / "job", TrialSpec())
    line = json.dumps({"type": "assistant", "message": {"role": "assistant", "content": []}})
    sessions = trial / "agent" / "sessions" / "projects" / "p"
    sessions.mkdir(parents=True)
    for i in range(6):
        (sessions / f"s{i}.jsonl").write_text((line + "\n") * (i + 1))
    trace_size = (trial / "agent" / "claude-code.txt").stat().st_size
    monkeypatch.setattr(trial_files, "MAX_KEPT_BYTES", trace_size + 3 * (len(line) + 1))
    with SafeDir.open(trial) as root:
        scan = trial_files.scan_trial_traces(root)
    assert len(scan.files) == 7 and 1 < len(scan.reads) < 7
    assert scan.kept_bytes <= trial_files.MAX_KEPT_BYTES

    export([tmp_path / "jobs"], tmp_path / "res", workers=1)
    (record,) = ResultsStore.open(tmp_path / "res", create=False).load()[0]
    assert len(record.trace_files) == 7
    for stored, source in zip(record.trace_files, scan.files, strict=True):
        assert stored_file(tmp_path / "res", record, stored) == (trial / source).read_bytes()


def test_an_agent_log_that_links_to_a_host_file_is_never_kept(tmp_path: Path) -> None:
    """No structured trace, so the export keeps the head of the agent's plain log: a log
    that is a link (or a hard link) to a host file is skipped, a plain one is kept."""
    canary = make_canary(tmp_path / "host")
    trial = write_trial(tmp_path / "jobs" / "job", TrialSpec(agent="oracle", trace=False))
    agent = trial / "agent"
    (agent / "zz-biggest.log").symlink_to(canary.file)  # the largest name would win
    os.link(canary.file, agent / "hard.txt")
    (agent / "oracle.txt").write_text("trained 20 steps\n")
    export([tmp_path / "jobs"], tmp_path / "res")
    records, _ = ResultsStore.open(tmp_path / "res", create=False).load()
    (record,) = records
    assert record.agent_log is not None
    kept = stored_file(tmp_path / "res", record, record.agent_log)
    assert kept == b"trained 20 steps\n"
    assert files_containing(tmp_path / "res", canary.text) == []
    assert links_under(tmp_path / "res") == []
