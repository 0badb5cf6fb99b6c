"""Kernel-enforced limits a candidate process puts on itself before it runs untrusted code.

Two layers, both unprivileged (they need ``no_new_privs``) and both inherited by every
child, so nothing the candidate starts can shed them:

- **seccomp**: a fixed deny list of the system calls that reach another identity without a
  file path (sockets, SysV and POSIX IPC, keyrings, io_uring, ptrace and friends). A call
  from another ABI (32-bit ``int 0x80``, x32) kills the process, since the list is per ABI.
- **Landlock** (when the kernel has it): files may be written only beneath the given
  directories, read everywhere; TCP bind/connect, abstract unix sockets and signals to
  processes outside the domain are refused (as far as the kernel's Landlock ABI goes).

Standard library only: it runs in the candidate's launcher (``service/shared/confine.py``) on Python
3.11+, and in the local sandbox's guard of nested instances (``envs/ptrace_guard``), which
installs a shorter list (:func:`install_denial`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

from posttrainbench.core import landlock

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
X32_SYSCALL_BIT = 0x40000000
# BPF opcodes: load word at absolute offset, jump if equal / greater-or-equal, return.
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06

# Per machine: (AUDIT_ARCH value, {name: number}) of the calls that are refused.
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "shmdt": 67,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "ptrace": 101,
            "semtimedop": 220,
            "mq_open": 240,
            "mq_unlink": 241,
            "mq_timedsend": 242,
            "mq_timedreceive": 243,
            "mq_notify": 244,
            "mq_getsetattr": 245,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "perf_event_open": 298,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "bpf": 321,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "pidfd_getfd": 438,
            "flock": 73,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "shmdt": 197,
            "semget": 190,
            "semctl": 191,
            "semtimedop": 192,
            "semop": 193,
            "msgget": 186,
            "msgctl": 187,
            "msgrcv": 188,
            "msgsnd": 189,
            "ptrace": 117,
            "mq_open": 180,
            "mq_unlink": 181,
            "mq_timedsend": 182,
            "mq_timedreceive": 183,
            "mq_notify": 184,
            "mq_getsetattr": 185,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "perf_event_open": 241,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "bpf": 280,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "pidfd_getfd": 438,
            "flock": 32,
        },
    ),
}
# Locks and leases are state of an inode that every process able to open it can see: a
# candidate could signal through them on any file the agent can open too (seen: lock bits on
# agent-made files carried an aggregate-only split's ids out). So `flock` is refused above and
# `fcntl` with these commands below: F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE,
# F_NOTIFY (the same numbers on both machines; 64-bit ABI only, other ABIs are killed).
FCNTL_NR = {"x86_64": 72, "aarch64": 25}
FCNTL_LOCK_COMMANDS = (6, 7, 37, 38, 1024, 1026)
NETWORK_CALLS = ("socket",)  # left out of the list when the candidate may use the network

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class ConfinementError(OSError):
    """The kernel refused a layer that must be in place before the candidate runs."""


def _word(value: object) -> object:
    # Variadic C calls read whole registers: pass every integer as a C long.
    return ctypes.c_long(value) if isinstance(value, int) else value


def _syscall(*args: object) -> int:
    result = _libc.syscall(*(_word(a) for a in args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def set_no_new_privs() -> None:
    """No setuid/file-capability gains from here on (required by both layers)."""
    if _libc.prctl(*(_word(a) for a in (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))) != 0:
        err = ctypes.get_errno()
        raise ConfinementError(err, f"no_new_privs: {os.strerror(err)}")


def denied_calls(network: bool) -> dict[str, int]:
    """The refused calls of this machine's ABI (``ConfinementError`` on an unknown machine)."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        raise ConfinementError(errno.ENOSYS, f"no system call table for {platform.machine()!r}")
    return {
        name: nr for name, nr in arch[1].items() if network is False or name not in NETWORK_CALLS
    }


def seccomp_program(network: bool) -> bytes:
    """The BPF program: other ABIs are killed, the denied calls fail with EPERM, the rest pass."""
    fcntl = FCNTL_NR.get(platform.machine())
    return _program(sorted(set(denied_calls(network).values())), fcntl_nr=fcntl)


def _program(numbers: list[int], fcntl_nr: int | None = None) -> bytes:
    """*numbers* fail with EPERM; with *fcntl_nr*, so does ``fcntl`` with a lock command."""
    audit_arch = _ARCHES[platform.machine()][0] if platform.machine() in _ARCHES else 0
    ops: list[tuple[int, int, int, int]] = [
        (_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 1, 0, audit_arch),
        (_RET, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (_LD_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    checks = [(_JGE, X32_SYSCALL_BIT)] if platform.machine() == "x86_64" else []
    checks += [(_JEQ, nr) for nr in numbers]
    # Each check jumps (over what follows it) to the EPERM return at the end.
    tail = 0 if fcntl_nr is None else 2 + len(FCNTL_LOCK_COMMANDS)
    for index, (op, value) in enumerate(checks):
        ops.append((op, len(checks) - index + tail, 0, value))
    if fcntl_nr is not None:
        commands = FCNTL_LOCK_COMMANDS
        ops.append((_JEQ, 0, len(commands) + 1, fcntl_nr))  # not fcntl: to ALLOW
        ops.append((_LD_ABS, 0, 0, 24))  # seccomp_data.args[1], its low word: the command
        for index, command in enumerate(commands):
            ops.append((_JEQ, len(commands) - index, 0, command))
    ops.append((_RET, 0, 0, SECCOMP_RET_ALLOW))
    ops.append((_RET, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    return b"".join(struct.pack("=HBBI", *op) for op in ops)


def named_calls(names: tuple[str, ...]) -> list[int]:
    """This machine's numbers of *names* (``ConfinementError`` on an unknown machine or name)."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        raise ConfinementError(errno.ENOSYS, f"no system call table for {platform.machine()!r}")
    unknown = [name for name in names if name not in arch[1]]
    if unknown:
        raise ConfinementError(errno.ENOSYS, f"no number for {', '.join(unknown)}")
    return sorted({arch[1][name] for name in names})


def _load(program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack(
        "=HxxxxxxQ", len(program) // 8, ctypes.addressof(buffer)
    )  # struct sock_fprog
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    if (
        _libc.prctl(*(_word(a) for a in (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog_buffer, 0, 0)))
        != 0
    ):
        err = ctypes.get_errno()
        raise ConfinementError(err, f"seccomp: {os.strerror(err)}")


def install_denial(names: tuple[str, ...]) -> None:
    """Load a filter that refuses only *names* (EPERM) and kills other ABIs, into this process
    and everything it starts (``no_new_privs`` must be set first, without CAP_SYS_ADMIN)."""
    _load(_program(named_calls(names)))


def install_seccomp(network: bool) -> None:
    """Load the filter into this process (and so into everything it starts)."""
    _load(seccomp_program(network))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing, disabled or filtered out."""
    return landlock.abi_version()


def install_landlock(writable: list[str], network: bool) -> int:
    """Read and execute everywhere, write only beneath *writable* (and ``/dev/null``);
    TCP refused unless *network*. Return the ABI used (0: not available)."""
    rules = {
        "/": landlock.READ | landlock.EXECUTE,
        "/dev/null": landlock.READ_FILE | landlock.WRITE_FILE,
    }
    rules.update(dict.fromkeys(writable, landlock.ALL))
    try:
        return landlock.restrict_self(rules, block_tcp=not network)
    except landlock.LandlockError as exc:
        raise ConfinementError(exc.errno, f"landlock: {exc.strerror}") from None
