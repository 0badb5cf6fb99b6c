"""`safe_fs` reads that spare syscalls (`read_fd`'s size, `SafeDir.names`, a given lstat) keep
every check, and `read_trial` reads each trial file once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from posttrainbench.core import safe_fs
from posttrainbench.core.nofollow import Refused, read_fd
from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results.export import export
from posttrainbench.host.results.harbor_trial import fingerprint, fingerprint_at, read_trial
from tests.results_fixtures import TrialSpec, write_trial


def _counting_reads(monkeypatch) -> list[int]:
    sizes: list[int] = []
    real = os.read

    def read(fd: int, n: int) -> bytes:
        sizes.append(n)
        return real(fd, n)

    monkeypatch.setattr(safe_fs.os, "read", read)
    return sizes


def test_read_fd_with_the_size_reads_a_small_file_in_one_call(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        sizes = _counting_reads(monkeypatch)
        assert read_fd(fd, 2**26, os.fstat(fd).st_size) == b"x" * 1000
    finally:
        os.close(fd)
    assert sizes == [1001]  # one byte past the size, and no empty read to confirm the end


@pytest.mark.parametrize("actual", [0, 10, 100, 5000])
def test_read_fd_with_a_stale_size_reads_what_is_there(tmp_path: Path, actual: int) -> None:
    """A file that grew or shrank since its fstat is read as `read_fd` without a size reads it."""
    (tmp_path / "f").write_bytes(b"y" * actual)
    for limit in (50, 2**20):
        fd = os.open(tmp_path / "f", os.O_RDONLY)
        try:
            assert read_fd(fd, limit, 100) == b"y" * min(actual, limit)
        finally:
            os.close(fd)


def test_names_lists_a_real_directory_only(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for name in ("b", "a", "c"):
        (tmp_path / "d" / name).write_text(name)
    (tmp_path / "link").symlink_to(tmp_path / "d")
    (tmp_path / "file").write_text("x")
    with SafeDir.open(tmp_path) as root:
        assert root.names("d") == ["a", "b", "c"]
        with pytest.raises(Refused, match="a symbolic link"):
            root.names("link")
        with pytest.raises(NotADirectoryError):
            root.names("file")
        with pytest.raises(FileNotFoundError):
            root.names("missing")


def _opened(monkeypatch) -> list[str]:
    names: list[str] = []
    real = os.open

    def opener(path, flags, mode=0o777, *, dir_fd=None):
        names.append(os.fspath(path))
        return real(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(safe_fs.os, "open", opener)
    return names


def test_a_given_lstat_is_checked_before_the_open(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "v").mkdir()
    os.mkfifo(tmp_path / "v" / "fifo")
    with SafeDir.open(tmp_path) as root:
        found = root.lstat("v/fifo")
        opened = _opened(monkeypatch)
        with pytest.raises(Refused, match="a FIFO"):
            root.read_bytes("v/fifo", 100, lstat=found)
    assert "fifo" not in opened


def test_a_file_swapped_after_the_given_lstat_is_refused_from_its_fstat(tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "f").write_text("harmless")
    (tmp_path / "host").write_text("host secret")  # what the agent swaps in a hard link to
    with SafeDir.open(tmp_path) as root:
        found = root.lstat("v/f")
        os.replace(tmp_path / "v" / "f", tmp_path / "v" / "old")
        os.link(tmp_path / "host", tmp_path / "v" / "f")
        with pytest.raises(Refused, match="a hard link"):
            root.read_bytes("v/f", 100, lstat=found)
        os.unlink(tmp_path / "v" / "f")
        os.mkfifo(tmp_path / "v" / "f")
        with pytest.raises(Refused, match="a FIFO"):  # opened O_NONBLOCK: it never blocks
            root.read_bytes("v/f", 100, lstat=found)


def test_a_given_lstat_is_taken_again_through_a_directory_fd_not_cached(
    tmp_path: Path, monkeypatch
) -> None:
    """Past the cache, the directory is walked afresh (it may be another by now), so the lstat
    given, taken through an earlier fd, is not used: the entry is lstat'ed again."""
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "f").write_text("data")
    monkeypatch.setattr(safe_fs, "MAX_CACHED_DIRS", 0)
    with SafeDir.open(tmp_path) as root:
        wrong = root.lstat("v")  # a directory's: used, it would make the read fail
        assert root.read_bytes("v/f", 100, lstat=wrong) == b"data"


def test_read_trial_takes_no_link_for_a_verdict_directory(tmp_path: Path) -> None:
    trial = write_trial(tmp_path / "job", TrialSpec())
    (tmp_path / "elsewhere").mkdir()
    (trial / "judges").symlink_to(tmp_path / "elsewhere")
    source = read_trial(trial)
    assert len(source.record.verdicts) == 5
    assert source.record.refused_files == []


def test_read_trial_sums_usage_from_the_trace_the_scan_read(tmp_path: Path, monkeypatch) -> None:
    """Without Harbor's token counts, usage comes from the best trace, as the scan read it:
    the trace file is opened once."""
    spec = TrialSpec(input_tokens=None, output_tokens=None, cost_usd=None)
    trial = write_trial(tmp_path / "job", spec)
    (trial / "agent" / "claude-code.txt").write_text(
        (trial / "agent" / "claude-code.txt")
        .read_text()
        .replace('"input_tokens": 0', '"input_tokens": 1234')
    )
    opened = _opened(monkeypatch)
    source = read_trial(trial)
    assert source.traces == ["agent/claude-code.txt"]
    assert source.record.usage.source == "trace"
    assert source.record.usage.input_tokens == 1234
    assert opened.count("claude-code.txt") == 1


def test_a_copy_of_countless_directories_holds_few_fds(tmp_path: Path) -> None:
    """A tree of many directories (an agent's snapshot, a final_model) is copied whole,
    with at most MAX_CACHED_DIRS directory fds held at once, never one per directory."""
    src = tmp_path / "src"
    deep = src / "/".join(f"d{i}" for i in range(40))
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("deep")
    for i in range(3 * safe_fs.MAX_CACHED_DIRS):
        (src / f"s{i:03d}").mkdir()
        (src / f"s{i:03d}" / "f.txt").write_text(str(i))
    before = len(os.listdir("/proc/self/fd"))
    budget = safe_fs.CopyBudget(max_bytes=2**20, max_files=10_000)
    sink = safe_fs.DirSink(tmp_path)
    peak = 0
    real_make_dir = sink.make_dir

    def make_dir(relative: str) -> None:
        nonlocal peak
        real_make_dir(relative)
        peak = max(peak, len(os.listdir("/proc/self/fd")))

    sink.make_dir = make_dir  # type: ignore[method-assign]
    with SafeDir.open(src) as root, sink:
        root.copy_tree("", sink, budget, target="copy")
    assert budget.refused == [] and budget.files == 3 * safe_fs.MAX_CACHED_DIRS + 1
    copy = tmp_path / "copy"
    assert (copy / deep.relative_to(src) / "bottom.txt").read_text() == "deep"
    assert (copy / "s150" / "f.txt").read_text() == "150"
    assert peak - before <= safe_fs.MAX_CACHED_DIRS + 45  # the cache, plus the source walk
    assert len(os.listdir("/proc/self/fd")) == before


def test_entries_lstats_only_the_names_asked_for(tmp_path: Path, monkeypatch) -> None:
    for name in ("judgement_a.json", "metrics.json", "junk-1", "junk-2"):
        (tmp_path / name).write_text("{}")
    os.mkfifo(tmp_path / "junk-fifo")
    with SafeDir.open(tmp_path) as root:
        found = root.entries("", lambda name: not name.startswith("junk"))
    assert [name for name, _ in found] == ["judgement_a.json", "metrics.json"]


def test_the_walks_fingerprint_by_path_is_the_readers(tmp_path: Path) -> None:
    """The walk decides a stored trial is unchanged from `fingerprint` (by path); the read
    took `fingerprint_at` (fd-relative): for a real trial the two must agree."""
    trial = write_trial(tmp_path / "job", TrialSpec())
    Judgement(
        judge="contamination", flagged=True, decided_by="override", justification="again"
    ).write(trial / "judges")
    with SafeDir.open(trial) as root:
        printed, listings = fingerprint_at(root)
    assert fingerprint(trial) == printed == read_trial(trial).record.fingerprint
    assert [name for name, _ in listings["judges"]] == ["judgement_contamination.json"]
    (trial / "verifier" / "metrics.json").write_text("{}")
    assert fingerprint(trial) != printed


def test_a_linked_verdict_directory_costs_a_read_never_an_update(tmp_path: Path) -> None:
    """By path, the walk's fingerprint follows a `judges/` swapped for a link; the reader's
    never does: such a trial is read again by each export and found unchanged."""
    trial = write_trial(tmp_path / "jobs" / "job", TrialSpec())
    (tmp_path / "elsewhere").mkdir()
    (trial / "judges").symlink_to(tmp_path / "elsewhere")
    Judgement(
        judge="contamination", flagged=True, decided_by="override", justification="planted"
    ).write(tmp_path / "elsewhere")
    assert len(export([tmp_path / "jobs"], tmp_path / "res").added) == 1
    again = export([tmp_path / "jobs"], tmp_path / "res")
    assert again.unchanged == 1 and not again.updated and not again.added
