"""The judge's sandbox: bubblewrap around :mod:`launch` and the agent CLI.

What the sandbox sees (a new mount namespace on an empty root):

- ``/usr`` (and the ``/bin``, ``/lib*`` links into it) read-only: the system's programs;
- the read-only binds the caller names (the agent CLIs, the Python that runs the tools,
  the trusted library the contamination tool imports), each at its own path;
- ``/etc``: only a ``passwd``/``group`` naming the judge's user, a ``hosts`` file, and the
  CA certificates (for an https endpoint); nothing else of the machine's ``/etc``;
- ``/home/judge``: the workspace (:mod:`workspace`), read-only but for its ``task/``
  directory, where the judge writes ``judgement.json``;
- ``/tmp`` and ``$HOME`` on a fresh tmpfs; ``/proc`` of its own pid namespace.

No environment variable of the verifier reaches it (``--clearenv``; the CLI's environment
arrives on the launcher's stdin). Its network namespace has loopback only: the launcher
forwards one loopback port to a Unix socket, and this module connects that socket to the
judge model's endpoint (host and port from the configured base URL) and nowhere else.

Users: the sandbox has a user namespace whose uid map this module writes (root to root,
the judge's uid to itself, nothing else); the launcher starts the CLI as the judge's
unprivileged uid with ``no_new_privs``, so it cannot read a root process's memory or
environment, nor gain root through a setuid program. A time cap kills the whole pid
namespace. Runs where unprivileged user namespaces are allowed (the local sandbox,
Modal, a cluster node); where they are not (Docker's default seccomp profile), the judge
is undecided with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

JUDGE_UID = 64999
SANDBOX_HOME = "/home/judge"
SANDBOX_TASK = f"{SANDBOX_HOME}/task"
SANDBOX_RUN = "/run/judge"
SANDBOX_LAUNCH = "/opt/ptb-judge/launch.py"
SOCKET_NAME = "model.sock"
OUTPUT_NAME = "cli_output.jsonl"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
CA_PATHS = ("/etc/ssl", "/etc/ca-certificates", "/etc/pki")
LAUNCH = Path(__file__).resolve().parent / "launch.py"


class SandboxError(RuntimeError):
    """The sandbox could not be started (no bwrap, no user namespaces)."""


@dataclass
class Endpoint:
    """Where the judge's model is: the CLI's base URL is rewritten to loopback."""

    host: str
    port: int
    local_port: int

    @classmethod
    def of_url(cls, url: str) -> Endpoint:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(host=parts.hostname, port=port, local_port=port)

    def sandbox_url(self, url: str) -> str:
        """*url* as the CLI inside sees it: an IP host becomes loopback (plain http); a
        name stays (the sandbox's /etc/hosts maps it to loopback, so TLS still checks
        the endpoint's certificate against its name)."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(url)
        if _is_ip(self.host):
            netloc = f"127.0.0.1:{self.local_port}"
            return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        return url


def _is_ip(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return False
    return True


@dataclass
class SandboxRun:
    """One CLI run: what it left and how it ended."""

    returncode: int | None
    timed_out: bool
    seconds: float
    output: bytes
    error: str | None = None


@dataclass
class JudgeSandbox:
    """How to run one judge CLI in its sandbox."""

    workspace: Path
    argv: list[str]
    env: dict[str, str]
    endpoint: Endpoint | None
    ro_binds: list[str] = field(default_factory=list)
    python: str = sys.executable
    uid: int = JUDGE_UID
    timeout_s: float = 1800.0
    max_output_bytes: int = 64 * 2**20


def _system_args() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _etc(run_dir: Path, endpoint: Endpoint | None, uid: int) -> list[str]:
    etc = run_dir / "etc"
    etc.mkdir()
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:/bin/sh\njudge:x:{uid}:{uid}:judge:{SANDBOX_HOME}:/bin/bash\n"
    )
    (etc / "group").write_text(f"root:x:0:\njudge:x:{uid}:\n")
    hosts = "127.0.0.1 localhost\n::1 localhost\n"
    if endpoint is not None and not _is_ip(endpoint.host):
        hosts += f"127.0.0.1 {endpoint.host}\n"
    (etc / "hosts").write_text(hosts)
    args = []
    for name in ("passwd", "group", "hosts"):
        args += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    for path in CA_PATHS:
        if os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


class _Forwarder:
    """The trusted end of the sandbox's one way out: each connection to the Unix socket
    is joined to a new TCP connection to the endpoint."""

    def __init__(self, path: Path, endpoint: Endpoint):
        self.endpoint = endpoint
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        os.chmod(path, 0o666)
        self.listener.listen(64)
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        from posttrainbench.task.integrity.agentic.launch import _pump

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(
                    (self.endpoint.host, self.endpoint.port), timeout=30
                )
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


def _write_id_maps(pid: int, uid: int) -> None:
    maps = f"0 0 1\n{uid} {uid} 1\n"
    Path(f"/proc/{pid}/uid_map").write_text(maps)
    Path(f"/proc/{pid}/gid_map").write_text(maps)


def _read_info(fd: int, deadline: float) -> dict:
    data = b""
    while time.monotonic() < deadline:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            info = json.loads(data)
        except ValueError:
            continue
        if isinstance(info, dict):
            return info
    raise SandboxError("bubblewrap did not start (see its output)")


def _proc_args(bwrap: str) -> list[str]:
    """A proc of the sandbox's own pid namespace where the kernel allows one; else the
    verifier's, read-only (then only the uid keeps the CLI out of other processes)."""
    probe = [bwrap, "--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc"]
    try:
        ok = (
            subprocess.run(
                [*probe, "true"], capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"}
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ["--proc", "/proc"] if ok else ["--ro-bind", "/proc", "/proc"]


def _parent_dirs(targets: list[str]) -> list[str]:
    """``--perms 0755 --dir D`` for each parent of a mount point: bubblewrap makes the
    ones it creates itself 0700, which the judge's user could not pass."""
    parents: set[str] = set()
    for target in targets:
        path = Path(target).parent
        while str(path) != "/":
            parents.add(str(path))
            path = path.parent
    args: list[str] = []
    for parent in sorted(parents, key=lambda p: len(Path(p).parts)):
        args += ["--perms", "0755", "--dir", parent]
    return args


def bwrap_argv(
    box: JudgeSandbox, run_dir: Path, block_fd: int, info_fd: int, bwrap: str = "bwrap"
) -> list[str]:
    """The bubblewrap command line of *box* (its state in *run_dir*)."""
    argv = [
        bwrap,
        "--unshare-user",
        "--userns-block-fd",
        str(block_fd),
        "--info-fd",
        str(info_fd),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--hostname",
        "judge",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        *_system_args(),
        "--dev",
        "/dev",
        *_proc_args(bwrap),
        # before the binds: a bind below /tmp (a test's CLI) must not be hidden by it
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        *_parent_dirs(
            ["/etc/hosts", SANDBOX_TASK, f"{SANDBOX_RUN}/out", SANDBOX_LAUNCH] + box.ro_binds
        ),
        *_etc(run_dir, box.endpoint, box.uid),
        "--ro-bind",
        str(box.workspace),
        SANDBOX_HOME,
        "--bind",
        str(box.workspace / "task"),
        SANDBOX_TASK,
        "--ro-bind",
        str(run_dir / "run"),
        SANDBOX_RUN,
        "--bind",
        str(run_dir / "out"),
        f"{SANDBOX_RUN}/out",
        "--ro-bind",
        str(LAUNCH),
        SANDBOX_LAUNCH,
    ]
    for path in box.ro_binds:
        argv += ["--ro-bind", path, path]
    argv += ["--chdir", SANDBOX_TASK, "--", box.python, "-I", "-S", SANDBOX_LAUNCH]
    return argv


def run_sandboxed(box: JudgeSandbox) -> SandboxRun:
    """Run the CLI of *box* in its sandbox, within its time cap."""
    bwrap = shutil.which("bwrap", path="/usr/bin:/bin")
    if bwrap is None:
        raise SandboxError("bubblewrap (bwrap) is not installed in the verifier")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ptb-judge-") as tmp:
        run_dir = Path(tmp)
        os.chmod(run_dir, 0o755)
        (run_dir / "run").mkdir(mode=0o755)
        (run_dir / "out").mkdir(mode=0o755)
        (run_dir / "run" / "out").mkdir(mode=0o755)  # the mount point of out/
        # The judge's user may add judgement.json to task/ (its files stay read-only).
        os.chown(box.workspace / "task", box.uid, box.uid)
        launcher_log = (run_dir / "launcher.log").open("wb")
        forwarder = (
            _Forwarder(run_dir / "run" / SOCKET_NAME, box.endpoint) if box.endpoint else None
        )
        block_r, block_w = os.pipe()
        info_r, info_w = os.pipe()
        config = {
            "listen": ["127.0.0.1", box.endpoint.local_port if box.endpoint else 9],
            "socket": f"{SANDBOX_RUN}/{SOCKET_NAME}",
            "uid": box.uid,
            "env": box.env,
            "argv": box.argv,
            "cwd": SANDBOX_TASK,
            "stdout": f"{SANDBOX_RUN}/out/{OUTPUT_NAME}",
            "mkdirs": [
                box.env[k] for k in ("HOME", "CODEX_HOME") if box.env.get(k, "").startswith("/tmp/")
            ],
        }
        try:
            proc = subprocess.Popen(
                bwrap_argv(box, run_dir, block_r, info_w, bwrap),
                stdin=subprocess.PIPE,
                stdout=launcher_log,
                stderr=subprocess.STDOUT,
                pass_fds=(block_r, info_w),
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
                cwd="/",
            )
        finally:
            os.close(block_r)
            os.close(info_w)
            launcher_log.close()
        error = None
        timed_out = False
        try:
            info = _read_info(info_r, started + 60)
            _write_id_maps(int(info["child-pid"]), box.uid)
            os.write(block_w, b"1")
            os.close(block_w)
            block_w = -1
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(config).encode())
            proc.stdin.close()
            left = max(1.0, box.timeout_s - (time.monotonic() - started))
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
        except (OSError, SandboxError, ValueError, KeyError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            if block_w >= 0:
                os.close(block_w)
            os.close(info_r)
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            if forwarder is not None:
                forwarder.close()
        launcher_out = (run_dir / "launcher.log").read_bytes()[-4000:]
        try:
            with open(run_dir / "out" / OUTPUT_NAME, "rb") as handle:
                output = handle.read(box.max_output_bytes)
        except OSError:
            output = b""
        if error is None and proc.returncode not in (0, None) and not timed_out and not output:
            error = launcher_out.decode("utf-8", "replace").strip()[-1000:] or None
    return SandboxRun(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=round(time.monotonic() - started, 1),
        output=output,
        error=error,
    )
