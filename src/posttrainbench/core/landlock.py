"""Landlock (Linux >= 5.13) through ctypes: a process confines itself and all it starts.

One binding for the two places that run untrusted code under a trusted parent: the
HumanEval candidate process (read-only beneath a few directories, nothing else) and an
agent task's candidate launcher (read everywhere, write only beneath its run). Each
passes its own rules to :func:`restrict_self`.

Besides the path rules, the domain refuses TCP bind/connect when asked (ABI >= 4) and
always scopes abstract unix sockets and signals to itself (ABI >= 6). Without Landlock
(old kernel, or a seccomp profile that hides the syscalls) nothing is done and ABI 0 is
returned, so the caller can record what applied. A domain is inherited, survives
``setuid`` and cannot be lifted; the kernel requires ``no_new_privs`` first.

Standard library only, no package-relative imports: the candidate-side scripts import it
by path from a root-owned directory.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Mapping

# Syscall numbers: the same on every architecture (added after the table unification).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# Filesystem rights (ABI 1: bits 0-12; REFER: ABI 2; TRUNCATE: ABI 3; IOCTL_DEV: ABI 5).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
READ = READ_FILE | READ_DIR
ALL = -1  # every filesystem right the running kernel handles
_FS_BY_ABI = {
    1: (1 << 13) - 1,
    2: (1 << 14) - 1,
    3: (1 << 15) - 1,
    4: (1 << 15) - 1,
    5: (1 << 16) - 1,
}
_FILE_RIGHTS = (
    EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)
)  # rights a non-directory can carry
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


class LandlockError(OSError):
    """Landlock is present but refused the restriction."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing, disabled or filtered out."""
    try:
        version = _libc().syscall(
            ctypes.c_long(_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def restrict_self(rules: Mapping[str, int], *, block_tcp: bool) -> int:
    """Confine this process to *rules* (path -> rights beneath it; :data:`ALL` for all).

    Everything not granted by a rule is refused, for the rights the kernel handles.
    Paths that do not exist are skipped (granting less, never more). Returns the ABI
    applied (0: Landlock unavailable, nothing done); raises :class:`LandlockError` if
    Landlock is there but refuses (e.g. ``no_new_privs`` is not set).
    """
    abi = abi_version()
    if abi < 1:
        return 0
    libc = _libc()
    handled_fs = _FS_BY_ABI.get(abi, _FS_BY_ABI[5])
    attr = _RulesetAttr(
        handled_fs, _NET_TCP if block_tcp and abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0
    )
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(
        ctypes.c_long(_CREATE_RULESET),
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path, rights in rules.items():
            _add_rule(libc, ruleset, path, handled_fs if rights == ALL else rights & handled_fs)
        if (
            libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0))
            < 0
        ):
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # absent here (e.g. /lib32)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS  # the kernel refuses directory rights on a file
        rule = _PathBeneathAttr(rights, fd)
        if (
            libc.syscall(
                ctypes.c_long(_ADD_RULE),
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            )
            < 0
        ):
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
