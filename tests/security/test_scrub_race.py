"""The post-run secret scrubber against what a hostile agent leaves in (and keeps doing to) its run directory.

`ptb run` and `ptb sweep` rewrite every text file below the run directory with the run's
secrets redacted. The agent wrote those files, and a process it left behind may still be
at work while the scrub runs: it swaps a directory for a link to a host directory whose
credentials file holds the very keys the scrubber redacts, turns a file into a FIFO,
plants link loops, hard links, undecodable names and floods of links, nests directories
hundreds deep.
The host's credentials must stay byte-identical, the scrub must finish without raising,
and what it did not scrub must be listed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from posttrainbench.core.safe_fs import MAX_DEPTH, MAX_REFUSALS_KEPT
from posttrainbench.host.credentials.scrub import Scrubber, ScrubReport

KEY = "ptb-host-api-key-0123456789abcdef"  # the host's own key: in its credentials and in the scrubber
AGENT = Path("jobs/job/trial/agent")  # below a run directory
HARBOR_FILES = ("config.json", "result.json", "trial.log")  # beside agent/, quoting the key too
RACE_ROUNDS = 40
RACE_SECONDS = 10  # the racing test stops after this long even if rounds remain

# A leftover agent process: flips <dir> between the real directory and a link to <host>,
# each state held about HOLD seconds (long enough for a scrub step to see it, short enough
# to change under one), until <stop> exists; <ready> is created after the first flip.
HOLD = 0.001
DIR_FLIPPER = r"""
import os, sys, time
target, host, stop, ready, hold = sys.argv[1:6]
aside = target + ".real"
while not os.path.exists(stop):
    os.rename(target, aside)
    os.symlink(host, target)
    time.sleep(float(hold))
    os.unlink(target)
    os.rename(aside, target)
    open(ready, "w").close()
    time.sleep(float(hold))
"""


@pytest.fixture
def scrubber() -> Scrubber:
    return Scrubber({"HOST_API_KEY": KEY})


def _host(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A host credentials directory outside every run, and its exact bytes."""
    host = tmp_path / "host" / ".config" / "ptb"
    host.mkdir(parents=True)
    files = {
        "credentials.json": json.dumps({"api_key": KEY}).encode(),
        "notes.log": f"host notes, key {KEY}\n".encode(),
    }
    for name, data in files.items():
        (host / name).write_bytes(data)
    return host, files


def _host_unchanged(host: Path, files: dict[str, bytes]) -> None:
    assert sorted(os.listdir(host)) == sorted(files), (
        "the scrub created or removed files in the host directory"
    )
    for name, data in files.items():
        assert (host / name).read_bytes() == data, f"host {name} was rewritten"


def _agent_dir(run: Path, files: int = 40) -> Path:
    """An agent log directory whose files hold the key; the last two are named like the host's.

    Harbor's files beside it (they quote the key too) are scrubbed between the listing of
    the trial directory and the walk into agent/: time in which a link can take its place."""
    agent = run / AGENT
    agent.mkdir(parents=True)
    for name in HARBOR_FILES:
        (agent.parent / name).write_text(json.dumps({"env": {"HOST_API_KEY": KEY}}))
    for i in range(files):
        (agent / f"a-step-{i:03d}.log").write_text(f"step {i}: using {KEY}\n" * 20)
    (agent / "credentials.json").write_text(json.dumps({"api_key": KEY}))
    (agent / "notes.log").write_text(f"agent notes, key {KEY}\n")
    return agent


def _start(script: str, *args: str | Path, ready: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-S", "-c", script, *map(str, args)])
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert proc.poll() is None, "the flipper died before its first flip"
        assert time.monotonic() < deadline, "the flipper never started"
        time.sleep(0.005)
    return proc


def _stop(proc: subprocess.Popen, stop: Path) -> None:
    stop.touch()
    try:
        assert proc.wait(timeout=20) == 0, "the flipper failed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _serialisable(report: ScrubReport) -> None:
    # `ptb run` writes the report into run.json: an agent's file name must not break that.
    json.loads(report.model_dump_json())


def _scrub_unless_it_hangs(scrubber: Scrubber, run: Path, fifo: Path, monkeypatch) -> ScrubReport:
    """The scrub's report; fails if it blocked (opening *fifo*), after releasing it. Undoes
    *monkeypatch* first, so that the test's own checks see the real `os`."""
    reports: list[ScrubReport] = []
    worker = threading.Thread(target=lambda: reports.append(scrubber.scrub_tree(run)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    hung = worker.is_alive()
    for _ in range(20):  # a writer opening the FIFO lets a blocked open return
        if not worker.is_alive():
            break
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # not a FIFO now, or no reader yet
        worker.join(timeout=0.5)
    monkeypatch.undo()
    assert not hung, f"the scrub blocked opening {fifo.name}, a FIFO"
    (report,) = reports
    return report


def test_a_directory_swapped_for_a_link_mid_scrub_is_never_written_through(
    tmp_path: Path, scrubber: Scrubber, monkeypatch
) -> None:
    """Deterministic: the swap happens while the scrub holds the first agent file's bytes."""
    host, files = _host(tmp_path)
    run = tmp_path / "run"
    agent = _agent_dir(run)
    real_scrub = Scrubber.scrub_bytes
    swapped = []

    def swap_then_scrub(self, data):
        if not swapped and b"using" in data:  # an agent log, not Harbor's files beside agent/
            agent.rename(agent.with_name("agent.real"))
            agent.symlink_to(host, target_is_directory=True)
            swapped.append(True)
        return real_scrub(self, data)

    monkeypatch.setattr(Scrubber, "scrub_bytes", swap_then_scrub)
    report = scrubber.scrub_tree(run)
    assert swapped
    _host_unchanged(host, files)
    # The directory the scrub opened is the one it finished, wherever the agent moved it.
    moved = agent.with_name("agent.real")
    left = [p.name for p in moved.iterdir() if KEY in p.read_text()]
    assert left == [] and report.files_changed == len(list(moved.iterdir())) + len(HARBOR_FILES), (
        report
    )
    assert not report.failures
    _serialisable(report)


def test_a_racing_process_flipping_a_directory_to_a_host_link_never_gets_the_scrub_there(
    tmp_path: Path, scrubber: Scrubber
) -> None:
    host, files = _host(tmp_path)
    started, changed, rounds = time.monotonic(), 0, 0
    while rounds < RACE_ROUNDS and time.monotonic() - started < RACE_SECONDS:
        run = tmp_path / f"run-{rounds}"
        agent = _agent_dir(run)
        flipper = _start(
            DIR_FLIPPER, agent, host, run / "stop", run / "ready", HOLD, ready=run / "ready"
        )
        try:
            report = scrubber.scrub_tree(run)
        finally:
            _stop(flipper, run / "stop")
        _host_unchanged(host, files)
        _serialisable(report)
        changed += report.files_changed
        rounds += 1
    # The race ran, and the scrub still did its work on the agent's files when it could.
    assert rounds >= 3 and changed > rounds * len(HARBOR_FILES)


def test_a_file_swapped_for_a_fifo_after_the_check_never_hangs_the_scrub(
    tmp_path: Path, scrubber: Scrubber, monkeypatch
) -> None:
    """Deterministic: every stat of the file sees a regular file, and right after each it is a
    FIFO. Opening a FIFO to read blocks until a writer comes: the agent decides when `ptb run` ends."""
    run = tmp_path / "run"
    agent = _agent_dir(run, files=2)
    pipe = agent / "pipe.log"
    pipe.write_text(KEY)
    real_stat, swapped = os.stat, []

    def stat_then_swap(path, *args, **kwargs):
        if isinstance(path, int) or os.path.basename(os.fsdecode(path)) != "pipe.log":
            return real_stat(path, *args, **kwargs)
        pipe.unlink()
        pipe.write_text(KEY)
        st = real_stat(path, *args, **kwargs)
        pipe.unlink()
        os.mkfifo(pipe)
        swapped.append(True)
        return st

    monkeypatch.setattr(os, "stat", stat_then_swap)
    report = _scrub_unless_it_hangs(scrubber, run, pipe, monkeypatch)
    assert swapped
    assert any(line.endswith("pipe.log: a FIFO") for line in report.refused), report.refused
    assert not [p for p in agent.glob("a-step-*") if KEY in p.read_text()]
    _serialisable(report)


def test_planted_links_loops_hard_links_and_odd_names_are_listed_not_followed(
    tmp_path: Path, scrubber: Scrubber, monkeypatch
) -> None:
    host, files = _host(tmp_path)
    run = tmp_path / "run"
    agent = _agent_dir(run, files=2)
    (agent / "credentials.json").unlink()
    (agent / "credentials.json").symlink_to(host / "credentials.json")
    (agent / "hostdir").symlink_to(host, target_is_directory=True)
    (agent / "loop").symlink_to(
        "loop"
    )  # resolving it raises: it once crashed the scrub, and `ptb run`
    (agent / "notes.log").unlink()
    os.link(
        host / "notes.log", agent / "notes.log"
    )  # rewritten, it would become a one-name copy the export takes
    os.mkfifo(agent / "pipe.log")
    odd = os.fsdecode(b"odd-\xff.log")  # not UTF-8: run.json must still be written
    (agent / odd).symlink_to(host / "notes.log")
    report = _scrub_unless_it_hangs(scrubber, run, agent / "pipe.log", monkeypatch)
    _host_unchanged(host, files)
    assert (agent / "credentials.json").is_symlink() and os.readlink(
        agent / "credentials.json"
    ) == str(host / "credentials.json")
    assert (agent / "notes.log").stat().st_ino == (host / "notes.log").stat().st_ino
    assert all(KEY not in (agent / f"a-step-{i:03d}.log").read_text() for i in range(2))
    refused = "\n".join(report.refused)
    for name, why in (
        ("credentials.json", "symbolic link"),
        ("hostdir", "symbolic link"),
        ("loop", "symbolic link"),
        ("notes.log", "hard link"),
        ("pipe.log", "FIFO"),
        ("odd-\\xff.log", "symbolic link"),
    ):
        assert f"{name}: a {why}" in refused, (name, refused)
    assert (
        report.files_skipped == 6
        and report.files_changed == 2 + len(HARBOR_FILES)
        and not report.failures
    )
    _serialisable(report)


def test_a_flood_of_links_lists_only_the_first(tmp_path: Path, scrubber: Scrubber) -> None:
    """Every refusal goes into run.json: a million planted links must not make it a million lines."""
    run = tmp_path / "run"
    agent = _agent_dir(run, files=1)
    for i in range(MAX_REFUSALS_KEPT + 50):
        (agent / f"link-{i:04d}").symlink_to("/etc/hostname")
    report = scrubber.scrub_tree(run)
    assert len(report.refused) == MAX_REFUSALS_KEPT and report.refused_more == 50
    assert report.files_skipped == MAX_REFUSALS_KEPT + 50


def test_deep_nesting_costs_only_the_cap(tmp_path: Path, scrubber: Scrubber, monkeypatch) -> None:
    """Directories nested deeper than the cap are listed, not walked: each level below the
    directories the walk keeps open costs a walk from one of them, so a few thousand levels
    would stall `ptb run` for minutes (here, 300 levels would cost ~29,000 directory opens)."""
    run = tmp_path / "run"
    agent = _agent_dir(run, files=1)
    os.makedirs(agent / "/".join(["d"] * 300))
    real_open, opened = os.open, []

    def counting_open(path, flags, *args, **kwargs):
        if flags & os.O_DIRECTORY:
            opened.append(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    report = scrubber.scrub_tree(run)
    monkeypatch.undo()
    assert any(
        line.endswith(f"nested deeper than {MAX_DEPTH} directories") for line in report.refused
    ), report.refused
    assert len(opened) < 500
    assert KEY not in (agent / "a-step-000.log").read_text()
