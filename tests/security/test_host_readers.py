"""Host-side readers of a trial directory against what a hostile agent leaves there.

`ptb results export`, `ptb report`, `ptb traces show`, `ptb judge`'s input loading and
`ptb sweep status` read trial directories the agent wrote. Planted links to a host
canary, a hard link to it, FIFOs, a 10 GB sparse file, and files swapped for links or
FIFOs between a check and the open must never put the canary's text into the results
store, the report or the terminal, never hang a reader, and be listed with why.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest

from posttrainbench.core import nofollow
from posttrainbench.core.nofollow import Refused
from posttrainbench.core.safe_fs import CopyBudget, SafeDir
from posttrainbench.host.cli.judge_cmd import _trial_inputs
from posttrainbench.host.results.export import export
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
from posttrainbench.task.integrity.traces.load import TraceInputError, parse_trace
from tests.helpers import run_ptb
from tests.results_fixtures import TrialSpec, stored_file, unpack_to_run_dir, write_trial
from tests.security.planting import (
    SPARSE_BYTES,
    Canary,
    files_containing,
    links_under,
    make_canary,
    plant_host_links,
)

CLI_TIMEOUT = 60  # a reader that opens a FIFO for reading blocks forever; this bounds the test


def _trial(tmp_path: Path, layout: str) -> Path:
    trial = write_trial(tmp_path / "jobs" / "job", TrialSpec(final_model=True))
    if (
        layout == "local"
    ):  # the local sandbox: Harbor copies /logs/artifacts to artifacts/logs/artifacts
        copied = trial / "artifacts" / "logs" / "artifacts"
        copied.mkdir(parents=True)
        for name in ("code_snapshot", "final_model"):
            os.replace(trial / "artifacts" / name, copied / name)
    return trial


def _store_is_clean(results: Path, canary: Canary) -> None:
    assert files_containing(results, canary.text) == []
    assert links_under(results) == []
    specials = [
        Path(d) / n
        for d, _, files in os.walk(results)
        for n in files
        if not stat.S_ISREG(os.lstat(Path(d) / n).st_mode)
    ]
    assert specials == []
    assert (
        sum(os.lstat(Path(d) / n).st_blocks for d, _, files in os.walk(results) for n in files)
        * 512
        < 2**24
    )


@pytest.mark.parametrize(("layout", "final_model"), [("local", "containing"), ("docker", "link")])
def test_export_report_and_traces_carry_nothing_of_the_host(
    tmp_path: Path, layout: str, final_model: str
) -> None:
    trial = _trial(tmp_path, layout)
    canary = make_canary(tmp_path / "host")
    planted = plant_host_links(trial, canary, final_model=final_model)
    assert planted.hard_links and planted.fifos and planted.sparse  # every kind was planted here

    exported = run_ptb(
        "results",
        "export",
        str(tmp_path / "jobs"),
        "-o",
        str(tmp_path / "res"),
        "--with-final-model",
        "--json",
        timeout=CLI_TIMEOUT,
    )
    assert exported.returncode == 0, exported.stderr
    summary = json.loads(exported.stdout)
    assert len(summary["added"]) == 1 and summary["skipped"] == []
    assert any("refused" in line for line in summary["warnings"])
    _store_is_clean(tmp_path / "res", canary)
    (record,) = ResultsStore.open(tmp_path / "res", create=False).load()[0]
    # Every planted path a reader looks at is listed with why (the Docker-layout decoy
    # `artifacts/logs` is simply not taken for the copied layout).
    expected = [p for p in planted.all if p != "artifacts/logs"]
    listed = {line.split(": ", 1)[0] for line in record.refused_files}
    assert sorted(p for p in expected if p not in listed) == []
    assert record.trace_files and record.snapshot_dir == "snapshot"
    assert stored_file(tmp_path / "res", record, "snapshot/train.py")  # the trial's own: copied
    assert (final_model == "link") == (record.final_model_dir is None)

    reported = run_ptb(
        "report", str(tmp_path / "res"), "-o", str(tmp_path / "report.html"), timeout=CLI_TIMEOUT
    )
    assert reported.returncode == 0, reported.stderr
    html = (tmp_path / "report.html").read_text()
    assert canary.text not in html and "refused files" in html

    shown = run_ptb("traces", "show", str(trial), timeout=CLI_TIMEOUT)
    assert shown.returncode == 0, shown.stderr
    assert canary.text not in shown.stdout + shown.stderr
    assert (
        "# Trace (claude-code)" in shown.stdout
        and "warning: refused: agent/codex.txt" in shown.stderr
    )
    # A file named directly: refused below the trial (a link on the way included), never followed.
    for named in (
        "agent/codex.txt",
        "agent/sessions/projects/p/s.jsonl",
        "agent/opencode.txt",
        "agent/pipe.jsonl",
        "agent/huge.jsonl",
    ):
        with pytest.raises(TraceInputError, match="refused to read trace file") as refused:
            parse_trace(trial / named)
        assert canary.text not in str(refused.value)
    direct = run_ptb(
        "traces", "show", str(trial / "agent/sessions/projects/p/s.jsonl"), timeout=CLI_TIMEOUT
    )
    assert direct.returncode == 2 and direct.stderr.startswith(
        "error: refused to read trace file"
    ), direct.stderr
    assert canary.text not in direct.stdout + direct.stderr


def test_judge_inputs_and_traces_take_nothing_of_the_host(tmp_path: Path) -> None:
    trial = _trial(tmp_path, "docker")
    canary = make_canary(tmp_path / "host")
    plant_host_links(trial, canary, final_model="link", sparse=False)
    found, refused = _trial_inputs(trial)
    assert found["final_model"] is None and "artifacts/final_model: a symbolic link" in refused
    assert found["code_snapshot"] == trial / "artifacts" / "code_snapshot"
    inputs = JudgeInputs(
        benchmark="gsm8k",
        final_model=found["final_model"],
        trial_dir=trial,
        agent_logs=[found["agent"]],
    )
    context = JudgeContext(inputs)
    assert [p.relative_to(trial).as_posix() for p in context.trace_files] == [
        "agent/claude-code.txt"
    ]
    assert context.traces and all(canary.text not in t.model_dump_json() for t in context.traces)


def _swap_after_check(monkeypatch, swap) -> None:
    """Make the agent win the race: *swap* runs right after the lstat check of a file passes."""
    original = nofollow.check_file
    done = {"swapped": False}

    def check_then_swap(st, shown, hard_links_ok):
        original(st, shown, hard_links_ok)
        if not done["swapped"]:
            done["swapped"] = True
            swap()

    monkeypatch.setattr(nofollow, "check_file", check_then_swap)


@pytest.mark.timeout(20)
def test_a_file_swapped_for_a_link_after_the_check_is_refused(tmp_path: Path, monkeypatch) -> None:
    canary = make_canary(tmp_path / "host")
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "trace.jsonl").write_text("harmless\n")

    def swap():
        os.replace(tmp_path / "trial" / "trace.jsonl", tmp_path / "trial" / "old")
        (tmp_path / "trial" / "trace.jsonl").symlink_to(canary.file)

    _swap_after_check(monkeypatch, swap)
    with SafeDir.open(tmp_path / "trial") as root, pytest.raises(Refused, match="a symbolic link"):
        root.read_head("trace.jsonl", 1000)


@pytest.mark.timeout(20)
def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """Opening a FIFO is already an effect: it releases a writer waiting on it (telling the
    agent when the host reads). Refused from its lstat, it stays unopened."""
    (tmp_path / "trial").mkdir()
    fifo = tmp_path / "trial" / "trace.jsonl"
    os.mkfifo(fifo)
    released = threading.Event()

    def writer() -> None:
        with open(fifo, "wb"):  # blocks until someone opens the FIFO for reading
            released.set()

    waiting = threading.Thread(target=writer, daemon=True)
    waiting.start()
    time.sleep(0.2)
    with SafeDir.open(tmp_path / "trial") as root, pytest.raises(Refused, match="a FIFO"):
        root.read_head("trace.jsonl", 1000)
    time.sleep(0.3)
    assert not released.is_set()
    with open(fifo, "rb"):  # let the writer go
        waiting.join(5)


@pytest.mark.timeout(20)
def test_a_file_swapped_for_a_fifo_after_the_check_never_blocks(
    tmp_path: Path, monkeypatch
) -> None:
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "trace.jsonl").write_text("harmless\n")

    def swap():
        (tmp_path / "trial" / "trace.jsonl").unlink()
        os.mkfifo(tmp_path / "trial" / "trace.jsonl")

    _swap_after_check(monkeypatch, swap)
    started = time.monotonic()
    with SafeDir.open(tmp_path / "trial") as root, pytest.raises(Refused, match="a FIFO"):
        root.read_head("trace.jsonl", 1000)
    assert time.monotonic() - started < 5


@pytest.mark.timeout(60)
def test_a_racing_agent_never_gets_the_host_file_into_the_store(tmp_path: Path) -> None:
    """A program the agent left running flips a trace, a snapshot file and a snapshot
    directory between the real ones and links to the host while exports run."""
    trial = _trial(tmp_path, "docker")
    canary = make_canary(tmp_path / "host")
    agent, snap = trial / "agent", trial / "artifacts" / "code_snapshot"
    (snap / "pkg").mkdir()
    (snap / "pkg" / "mod.py").write_text("x = 1\n")
    files = [
        (agent / "claude-code.txt", (agent / "claude-code.txt").read_bytes()),
        (snap / "train.py", (snap / "train.py").read_bytes()),
    ]
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            for path, content in files:
                link, fresh = (
                    path.with_name(f".link-{path.name}"),
                    path.with_name(f".new-{path.name}"),
                )
                link.unlink(missing_ok=True)
                link.symlink_to(canary.file)
                os.replace(link, path)
                fresh.write_bytes(content)
                os.replace(fresh, path)
            os.rename(snap / "pkg", snap / ".pkg")
            (snap / "pkg").symlink_to(canary.dir)
            (snap / "pkg").unlink()
            os.rename(snap / ".pkg", snap / "pkg")

    racer = threading.Thread(target=flip, daemon=True)
    racer.start()
    added = 0
    try:
        deadline, runs = time.monotonic() + 4, 0
        while time.monotonic() < deadline or runs < 5:
            results = tmp_path / f"res{runs}"
            added += len(export([tmp_path / "jobs"], results, workers=1).added)
            _store_is_clean(results, canary)
            runs += 1
    finally:
        stop.set()
        racer.join()
    assert added >= 1


def test_safe_dir_refuses_each_kind_and_caps(tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "host")
    root_dir = tmp_path / "trial"
    (root_dir / "real").mkdir(parents=True)
    (root_dir / "real" / "ok.txt").write_text("fine")
    (root_dir / "dirlink").symlink_to(canary.dir)
    (root_dir / "filelink").symlink_to(canary.file)
    os.link(canary.file, root_dir / "hard.txt")
    os.mkfifo(root_dir / "pipe")
    with open(root_dir / "sparse.bin", "wb") as handle:
        handle.truncate(SPARSE_BYTES)
    with SafeDir.open(root_dir) as root:
        assert root.read_bytes("real/ok.txt", 100) == b"fine"
        for relative, why in (
            ("dirlink/config.json", "a symbolic link"),
            ("filelink", "a symbolic link"),
            ("hard.txt", "a hard link"),
            ("pipe", "a FIFO"),
            ("sparse.bin", "a sparse file"),
            ("../host/host_secret.txt", "not a path inside"),
            ("/etc/passwd", "not a path inside"),
        ):
            with pytest.raises(Refused, match=why):
                root.read_head(relative, 100)
        with pytest.raises(Refused, match="larger than the 2-byte cap"):
            root.read_bytes("real/ok.txt", 2)
        assert root.lstat("dirlink/config.json") is None and not root.is_dir("dirlink")
        budget = CopyBudget(max_bytes=2**20, max_files=100)
        root.copy_tree("", tmp_path / "copy", budget)
    assert sorted((tmp_path / "copy").rglob("*")) == [
        tmp_path / "copy" / "real",
        tmp_path / "copy" / "real" / "ok.txt",
    ]
    assert sorted(line.split(":")[0] for line in budget.refused) == [
        "dirlink",
        "filelink",
        "hard.txt",
        "pipe",
        "sparse.bin",
    ]
    capped = CopyBudget(max_bytes=3, max_files=100)
    with SafeDir.open(root_dir / "real") as real:
        real.copy_tree("", tmp_path / "capped", capped)
    assert capped.refused == ["ok.txt: 4 bytes: over the copy cap of 3 bytes"]


def test_the_report_reads_no_link_a_store_holds(tmp_path: Path) -> None:
    """A store an older exporter wrote may hold links (it copied them as links)."""
    from posttrainbench.host.cli.results_cmd import build_leaderboard
    from posttrainbench.host.results.report.render import render_report

    _trial(tmp_path, "docker")
    canary = make_canary(tmp_path / "host")
    export([tmp_path / "jobs"], tmp_path / "res")
    (record,) = ResultsStore.open(tmp_path / "res", create=False).load()[0]
    stored = unpack_to_run_dir(tmp_path / "res", record.id) / record.trace_files[0]
    stored.unlink()
    stored.symlink_to(canary.file)
    board, records = build_leaderboard(tmp_path / "res", "mean", None, None)
    html = render_report(board, records, tmp_path / "res")
    assert (
        canary.text not in html
        and f"cannot read trace {record.trace_files[0]}: a symbolic link" in html
    )


def test_runs_an_older_exporter_stored_are_exported_again(tmp_path: Path, monkeypatch) -> None:
    """Runs stored before the readers refused links may hold host files: a new export
    replaces them even though the trial itself did not change."""
    from posttrainbench.host.results import harbor_trial

    _trial(tmp_path, "docker")
    canary = make_canary(tmp_path / "host")
    monkeypatch.setattr(harbor_trial, "READER_VERSION", "")  # what the old exporter fingerprinted
    export([tmp_path / "jobs"], tmp_path / "res")
    (record,) = ResultsStore.open(tmp_path / "res", create=False).load()[0]
    run_dir = unpack_to_run_dir(tmp_path / "res", record.id)  # the old store's layout
    shutil.copy(canary.file, run_dir / record.trace_files[0])  # what it copied
    monkeypatch.undo()
    assert len(export([tmp_path / "jobs"], tmp_path / "res").updated) == 1
    _store_is_clean(tmp_path / "res", canary)


def test_a_flood_of_trace_candidates_costs_only_the_cap(tmp_path: Path) -> None:
    """Millions of files in `agent/sessions/` would each be opened and sniffed; past the cap
    none is, and that is said."""
    from posttrainbench.task.integrity.traces.trial_files import MAX_CANDIDATES, scan_trial_traces

    sessions = tmp_path / "trial" / "agent" / "sessions"
    sessions.mkdir(parents=True)
    for i in range(MAX_CANDIDATES + 50):
        (sessions / f"{i:05d}.jsonl").write_text("x\n")
    with SafeDir.open(tmp_path / "trial") as root:
        scan = scan_trial_traces(root)
    assert scan.files == [] and len(scan.refused) == 1 and "over the cap of" in scan.refused[0]


def test_sweep_status_reads_through_the_same_guard(tmp_path: Path) -> None:
    from posttrainbench.host.sweep.trials import should_retry

    trial = _trial(tmp_path, "docker")
    elsewhere = write_trial(
        tmp_path / "other", TrialSpec(error="EnvironmentStartTimeoutError", score=None)
    )
    assert should_retry(elsewhere) is True
    (trial / "result.json").unlink()
    (trial / "result.json").symlink_to(elsewhere / "result.json")
    assert should_retry(trial) is False  # unreadable: left alone, never followed
