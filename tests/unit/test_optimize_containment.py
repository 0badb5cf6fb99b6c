"""Contained candidate runs, for real: a fresh uid per run, the launcher's kernel layers
(Landlock, seccomp, limits), nothing left running or on disk afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from posttrainbench.core import syscall_filter
from posttrainbench.service.shared.candidate_run import contained_run, run_command
from posttrainbench.service.shared.config import CandidateLimits
from posttrainbench.service.shared.identity import IdentityPool, processes_of
from posttrainbench.service.shared.runas import prepare_runs_root
from tests.optimize_fixtures import needs_root, open_dir

pytestmark = needs_root
LIMITS = CandidateLimits()


def _run(
    tmp_path: Path,
    program: str,
    limits: CandidateLimits = LIMITS,
    timeout_s: float = 20,
    runs_root: Path | None = None,
    argv: tuple[str, ...] = ("python3", "main.py"),
):
    """Run *program* (Python, or *argv*) as a fresh candidate; return (outcome, its uid, its run dir)."""
    pool = IdentityPool(tmp_path / "identities.json")
    with contained_run(pool, runs_root or prepare_runs_root(None)) as (identity, run):
        (run.code / "main.py").write_text(program)
        os.chown(run.code / "main.py", identity.uid, identity.gid)
        outcome = run_command(
            identity,
            run,
            list(argv),
            {"PATH": "/usr/bin:/bin", "HOME": str(run.home), "TMPDIR": str(run.tmp)},
            b"",
            timeout_s,
            limits,
        )
    assert not run.root.exists()  # the run directory goes with the run
    return outcome, identity.uid, run


PROBES = r"""
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def refused(fn):
    try:
        fn()
        return False
    except OSError:
        return True
def call(nr, *args):
    failed = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args]) == -1
    return failed and ctypes.get_errno() == errno.EPERM
out = {
    "uid": os.getuid(),
    "inet": refused(lambda: socket.socket(socket.AF_INET)),
    "unix": refused(lambda: socket.socket(socket.AF_UNIX)),
    "socketpair": not refused(lambda: socket.socketpair()),
    "shmget": call(29, 0, 4096, 0o1666),  # IPC_PRIVATE | IPC_CREAT | 0666
    "x32_getpid": call(0x40000000 + 39),
    "write_tmp": refused(lambda: open("/tmp/ptb-leak-%d" % os.getuid(), "w")),
    "write_home": not refused(lambda: open(os.path.join(os.environ["HOME"], "ok"), "w")),
    "write_tmpdir": not refused(lambda: open(os.path.join(os.environ["TMPDIR"], "ok"), "w")),
    "oom": open("/proc/self/oom_score_adj").read().strip(),
}
import fcntl, struct
fd = os.open("/etc/passwd", os.O_RDONLY)  # a file every user can open: its locks are shared
read_lock = struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 0, 0, 0)
out.update({
    "flock": refused(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    "posix_lock": refused(lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    "ofd_lock": refused(lambda: fcntl.fcntl(fd, 37, read_lock)),
    "notify": refused(lambda: fcntl.fcntl(os.open("/etc", os.O_RDONLY), 1026, 1)),
    "fcntl_getfl": not refused(lambda: fcntl.fcntl(fd, fcntl.F_GETFL)),
})
print(json.dumps(out))
"""


@pytest.mark.skipif(
    os.uname().machine != "x86_64", reason="the probe's syscall numbers are x86_64's"
)
def test_candidate_gets_no_socket_no_ipc_no_shared_write_and_other_abis_are_refused(tmp_path):
    outcome, uid, _ = _run(tmp_path, PROBES)
    assert outcome.status == "ok", outcome.stderr_tail
    got = json.loads(outcome.stdout)
    assert got["uid"] == uid
    assert got["inet"] and got["unix"] and got["shmget"] and got["x32_getpid"], got
    assert all(got[k] for k in ("flock", "posix_lock", "ofd_lock", "notify", "fcntl_getfl")), got
    assert (
        got["socketpair"] and got["write_home"] and got["write_tmpdir"] and got["oom"] == "1000"
    ), got
    if syscall_filter.landlock_abi():  # /tmp is 1777 on this host: only Landlock keeps it out
        assert got["write_tmp"], got
    assert not Path(f"/tmp/ptb-leak-{uid}").exists()


DAEMON = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        sys.stdout.close(); sys.stderr.close(); os.close(0)
        time.sleep(300)
    os._exit(0)
print("parent done")
"""


def test_a_daemonized_process_does_not_outlive_its_run(tmp_path):
    outcome, uid, _ = _run(tmp_path, DAEMON)
    assert outcome.status == "ok" and "parent done" in outcome.stdout
    assert processes_of(uid) == []


FORK_BOMB = r"""
import os, time
for _ in range(100000):
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"""


def test_a_fork_bomb_is_bounded_and_leaves_nothing(tmp_path):
    start = time.monotonic()
    outcome, uid, _ = _run(tmp_path, FORK_BOMB, CandidateLimits(max_processes=40), timeout_s=3)
    assert outcome.status == "timeout" and time.monotonic() - start < 30, outcome
    assert processes_of(uid) == []


def test_file_and_output_limits_stop_the_run_with_a_reason(tmp_path):
    # Python ignores SIGXFSZ (the write fails); other programs are killed by it: both say so.
    big_file = "open('big', 'wb').write(b'x' * (3 << 20))\n"
    outcome, _, _ = _run(tmp_path, big_file, CandidateLimits(max_file_mb=1))
    assert outcome.status == "error" and "File too large" in outcome.stderr_tail
    outcome, _, _ = _run(
        tmp_path,
        "",
        CandidateLimits(max_file_mb=1),
        argv=("dd", "if=/dev/zero", "of=big", "bs=1M", "count=3"),
    )
    assert outcome.status == "limit" and "a file exceeded 1 MB" in outcome.reason
    chatty = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    outcome, _, _ = _run(tmp_path, chatty, CandidateLimits(max_output_mb=1))
    assert outcome.status == "limit" and "more than 1 MB to stdout" in outcome.reason
    assert len(outcome.stdout) <= 1 << 20


def test_filling_the_disk_stops_the_run_and_frees_the_space(tmp_path):
    with open_dir() as public:
        _fill_a_small_disk(tmp_path, public / "small")


def _fill_a_small_disk(tmp_path: Path, mount: Path) -> None:
    mount.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", str(mount)]
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        filler = (
            "import os\nwith open('fill', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))\n"
            "        f.flush()\n"
        )
        outcome, _, _ = _run(
            tmp_path,
            filler,
            CandidateLimits(disk_reserve_mb=32, max_file_mb=1024),
            runs_root=prepare_runs_root(mount / "runs"),
        )
        assert outcome.status == "limit" and "the disk is full" in outcome.reason
        assert (
            os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize > 60 << 20
        )  # its files are gone
    finally:
        subprocess.run(["umount", str(mount)])


def test_an_aggregate_evaluation_runs_alone() -> None:
    """It waits for the viewable ones running, and new viewable ones wait for it."""
    import threading

    from posttrainbench.service.api.eval_gate import EvalGate

    gate, order, release = EvalGate(), [], threading.Event()

    def hold(kind: str) -> None:
        with gate.alone() if kind == "alone" else gate.side_by_side():
            order.append(kind)
            release.wait(5)

    with gate.side_by_side():
        alone = threading.Thread(target=hold, args=("alone",), daemon=True)
        alone.start()
        time.sleep(0.2)
        later = threading.Thread(target=hold, args=("later",), daemon=True)
        later.start()
        time.sleep(0.2)
        assert (
            order == []
        )  # the aggregate waits for the running viewable one, the new one waits behind it
    time.sleep(0.2)
    assert order == ["alone"]  # and the new viewable one still waits while it runs
    release.set()
    for thread in (alone, later):
        thread.join(5)
    assert order == ["alone", "later"]
