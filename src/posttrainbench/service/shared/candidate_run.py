"""One contained run of untrusted code: a fresh identity, its own run directory, its code
unpacked by that identity, the command run confined and watched, then everything of the
identity killed (checked) and the directory deleted.

Order in :func:`contained_run`: issue a uid -> make the run directory (root) -> the caller
unpacks (:func:`unpack`) and runs (:func:`run_command`) -> reap the uid (``identity.reap``,
which raises when anything survives) -> delete the directory. Root never walks, opens or
changes anything inside the directory while a process of the run can still change it.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from posttrainbench.service.shared import tar_stream
from posttrainbench.service.shared.candidates import GIT_ENV, ArchiveSource
from posttrainbench.service.shared.config import CandidateLimits
from posttrainbench.service.shared.errors import CandidateError
from posttrainbench.service.shared.identity import Identity, IdentityPool, reap
from posttrainbench.service.shared.launcher_python import helper, launcher_python
from posttrainbench.service.shared.runas import RunDir, confined_argv, make_run_dir, remove_run_dir

UNPACK_TIMEOUT_S = 120.0
_WATCH_PERIOD_S = 0.2
_STDERR_TAIL = 4000
_MB = 1 << 20
Status = Literal["ok", "error", "timeout", "limit"]


class CodeRefused(CandidateError):
    """The candidate's code cannot be unpacked (too large, malformed, or the disk is full)."""


@dataclass
class RunOutcome:
    """What one command run produced and how it ended (``reason``: why a limit stopped it)."""

    stdout: str
    stderr_tail: str
    status: Status
    exit_code: int | None
    reason: str | None = None


@contextmanager
def contained_run(pool: IdentityPool, runs_root: Path) -> Iterator[tuple[Identity, RunDir]]:
    """A fresh identity and its run directory; afterwards nothing of either is left."""
    identity = pool.issue()
    run = make_run_dir(runs_root, identity)
    try:
        yield identity, run
    finally:
        try:
            reap(identity)
        finally:
            remove_run_dir(run)


def _last_line(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""


def unpack(
    source: ArchiveSource, dest: Path, identity: Identity | None, limits: CandidateLimits
) -> None:
    """Stream *source* into the empty directory *dest*: as *identity* (confined to *dest*), or
    as this process when *identity* is None (then *dest* must be writable by this process only).

    Raises :class:`CodeRefused` with the reason (the unpacker's, or why the source could not
    be archived)."""
    unpack_argv = [
        launcher_python(),
        "-I",
        "-S",
        helper("tar_stream.py"),
        "unpack",
        str(dest),
        "--max-bytes",
        str(limits.max_code_mb * _MB),
        "--max-files",
        str(limits.max_code_files),
    ]
    if identity is not None:
        unpack_argv = confined_argv(identity, unpack_argv, cwd=dest, writable=[dest], limits=limits)
    with tempfile.TemporaryFile() as producer_err, tempfile.TemporaryFile() as unpacker_err:
        producer = subprocess.Popen(
            list(source.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=producer_err,
            env=GIT_ENV,
            cwd="/",
            start_new_session=True,
        )
        try:
            unpacker = subprocess.Popen(
                unpack_argv,
                stdin=producer.stdout,
                stdout=subprocess.DEVNULL,
                stderr=unpacker_err,
                env={},
                cwd="/",
                start_new_session=True,
            )
        finally:
            assert producer.stdout is not None
            producer.stdout.close()  # the unpacker holds the pipe now: the producer sees it close
        try:
            unpacked = unpacker.wait(timeout=UNPACK_TIMEOUT_S)
            produced = producer.wait(timeout=UNPACK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for proc in (unpacker, producer):
                proc.kill()
                proc.wait()
            raise CodeRefused(
                f"unpacking {source.label} took more than {UNPACK_TIMEOUT_S:.0f} s"
            ) from None
        producer_err.seek(0)
        unpacker_err.seek(0)
        if unpacked != 0:
            reason = (
                _last_line(unpacker_err.read()) or f"the unpacker exited with status {unpacked}"
            )
            if (
                produced != 0 and unpacked == tar_stream.REFUSED
            ):  # a truncated stream: the producer failed
                reason = _last_line(producer_err.read()) or reason
            raise CodeRefused(reason)
        if produced != 0:
            raise CodeRefused(f"cannot archive {source.label}: {_last_line(producer_err.read())}")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Watch:
    """Feeds stdin, collects capped stdout and stderr's tail, stops the run at a limit."""

    def __init__(
        self, proc: subprocess.Popen[bytes], stdin: bytes, run: RunDir, limits: CandidateLimits
    ) -> None:
        self.proc, self.run, self.limits = proc, run, limits
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.reason: str | None = None
        self._threads = [
            threading.Thread(target=self._feed, args=(stdin,), daemon=True),
            threading.Thread(
                target=self._collect, args=(proc.stdout, self.stdout, False), daemon=True
            ),
            threading.Thread(
                target=self._collect, args=(proc.stderr, self.stderr, True), daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()

    def _feed(self, data: bytes) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the candidate stopped reading: its answers decide

    def _collect(self, pipe: io.BufferedIOBase, sink: bytearray, tail: bool) -> None:
        cap = self.limits.max_output_mb * _MB
        while chunk := pipe.read1(1 << 16):
            sink.extend(chunk)
            if tail:
                del sink[:-_STDERR_TAIL]
            elif len(sink) > cap:
                self.stop(f"the candidate wrote more than {self.limits.max_output_mb} MB to stdout")
                del sink[cap:]
                return

    def stop(self, reason: str) -> None:
        """Kill the run's process group for *reason* (the first reason is kept)."""
        if self.reason is None:
            self.reason = reason
        _kill_group(self.proc.pid)

    def over_disk_reserve(self) -> str | None:
        """A reason to stop when the run's filesystem has less than the reserve left."""
        try:
            info = os.statvfs(self.run.root)
        except OSError:
            return None
        free_mb = info.f_bavail * info.f_frsize // _MB
        if free_mb < self.limits.disk_reserve_mb:
            return f"the disk is full: {free_mb} MB left, below the {self.limits.disk_reserve_mb} MB reserve"
        return None

    def join(self, timeout_s: float) -> None:
        """Wait for the pipes to close (they do once every process of the run is dead)."""
        for thread in self._threads:
            thread.join(timeout_s)


def run_command(
    identity: Identity,
    run: RunDir,
    argv: list[str],
    env: dict[str, str],
    stdin: bytes,
    timeout_s: float,
    limits: CandidateLimits,
    network: bool = False,
) -> RunOutcome:
    """Run *argv* confined as *identity* in ``run.code`` and watch it; kill all of it at the end."""
    full = confined_argv(
        identity, argv, cwd=run.code, writable=[run.root], limits=limits, network=network
    )
    proc = subprocess.Popen(
        full,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
        start_new_session=True,
    )
    watch = _Watch(proc, stdin, run, limits)
    deadline = time.monotonic() + timeout_s
    timed_out = False
    while proc.poll() is None:
        if time.monotonic() > deadline:
            timed_out = True
            watch.stop("timeout")
            break
        disk = watch.over_disk_reserve()
        if disk:
            watch.stop(disk)
            break
        time.sleep(_WATCH_PERIOD_S)
    code = proc.wait()
    if watch.reason is None:  # a fast writer may fill the disk between two looks
        watch.reason = watch.over_disk_reserve()
    # The command is over: whatever it left running goes now, so the pipes close.
    reap(identity)
    if not identity.switches:
        _kill_group(proc.pid)  # a non-root service can only kill the run's own process group
    watch.join(10)
    stdout = bytes(watch.stdout).decode("utf-8", "replace")
    stderr = bytes(watch.stderr[-_STDERR_TAIL:]).decode("utf-8", "replace")
    if timed_out:
        return RunOutcome(stdout, stderr, "timeout", None, f"no answer within {timeout_s:.0f} s")
    if watch.reason is not None:
        return RunOutcome(stdout, stderr, "limit", None, watch.reason)
    if code == -signal.SIGXFSZ:
        return RunOutcome(stdout, stderr, "limit", code, f"a file exceeded {limits.max_file_mb} MB")
    return RunOutcome(stdout, stderr, "ok" if code == 0 else "error", code)
