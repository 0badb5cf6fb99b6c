"""Run a command unable to ptrace or to read or write another process's memory.

``python -I -S ptrace_guard.py CMD ARG...``: sets ``no_new_privs``, loads a seccomp filter
refusing :data:`DENIED` (and other ABIs), then becomes CMD. The local sandbox starts every
command of a *nested* instance through it (a Mode B inner trial, where the candidate runs
as the instance's root): without it, the candidate could attach to a process the
environment had before it started (its init, which the proxy's sweep must spare) and run
code there on into the task's verifier. Standard library only (``-I -S``).
"""

from __future__ import annotations

import os
import sys

# -I leaves the root-owned dir holding the package out of the path.
sys.path[:0] = [
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
]
from posttrainbench.core import syscall_filter  # noqa: E402

DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")
GUARD_FAILED = 126


def guarded_argv(argv: list[str]) -> list[str]:
    """*argv* run through this guard, with the harness's own interpreter."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *argv]


def main(argv: list[str]) -> int:
    """Guard this process, then exec *argv* (returns only on failure)."""
    if not argv:
        print("usage: ptrace_guard.py CMD [ARG...]", file=sys.stderr)
        return 2
    try:
        syscall_filter.set_no_new_privs()
        syscall_filter.install_denial(DENIED)
    except OSError as exc:
        print(f"ptrace_guard: {exc}", file=sys.stderr)
        return GUARD_FAILED
    os.execvp(argv[0], argv)
    return GUARD_FAILED  # not reached: execvp raises on failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
