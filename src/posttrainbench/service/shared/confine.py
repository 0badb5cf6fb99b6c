"""The candidate's launcher: confine this process, then become the candidate's command.

Started by the trusted side, already as the run's fresh uid (``setpriv``), as
``python3 -I -S confine.py --cwd DIR --writable DIR ... [--network] [limits] -- CMD ...``.
``-I -S`` keep the candidate's files and environment out of this interpreter, so
nothing of the candidate runs before the last line's ``exec``. In order:

1. resource limits (processes of this uid, open files, file size, no core dumps) and the
   highest OOM score, so that under memory pressure the kernel kills candidates first;
2. ``no_new_privs``, Landlock (writes only beneath ``--writable``) and the seccomp filter
   (see ``posttrainbench.core.syscall_filter``); a layer the kernel has but refuses stops the run (exit 126);
3. ``chdir`` (as this uid: the trusted side never enters the candidate's directories)
   and ``exec`` of the command with the environment it was given.

Standard library only (Python 3.11+), like ``posttrainbench.core.syscall_filter``.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys

# -I leaves the root-owned dir holding the package out of the path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))]
from posttrainbench.core import syscall_filter  # noqa: E402

CONFINE_FAILED = 126
NOT_FOUND = 127


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def confine(args: argparse.Namespace) -> int:
    """Apply every layer in this process; return the Landlock ABI used (0: none)."""
    _limit(resource.RLIMIT_NPROC, args.max_processes)
    _limit(resource.RLIMIT_NOFILE, args.max_open_files)
    _limit(resource.RLIMIT_FSIZE, args.max_file_bytes)
    _limit(resource.RLIMIT_CORE, 0)
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as handle:
            handle.write("1000")
    except OSError:
        pass  # no procfs: the cgroup's own limit still holds
    syscall_filter.set_no_new_privs()
    abi = syscall_filter.install_landlock(args.writable, network=args.network)
    syscall_filter.install_seccomp(network=args.network)
    return abi


def main(argv: list[str] | None = None) -> int:
    """Parse, confine, chdir, exec; returns only on failure."""
    parser = argparse.ArgumentParser(prog="confine.py")
    parser.add_argument("--cwd", required=True)
    parser.add_argument(
        "--writable", action="append", default=[], help="a directory the run may write beneath"
    )
    parser.add_argument("--network", action="store_true", help="leave sockets and TCP allowed")
    parser.add_argument("--max-processes", type=int, required=True)
    parser.add_argument("--max-open-files", type=int, required=True)
    parser.add_argument("--max-file-bytes", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    try:
        confine(args)
        os.chdir(args.cwd)
    except OSError as exc:
        print(f"cannot confine the candidate: {exc}", file=sys.stderr)
        return CONFINE_FAILED
    for sig in (
        signal.SIGPIPE,
        signal.SIGXFSZ,
    ):  # this interpreter ignores them; exec would keep that
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(command[0], command, os.environ)
    except OSError as exc:
        print(f"cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
    return NOT_FOUND


if __name__ == "__main__":
    sys.exit(main())
