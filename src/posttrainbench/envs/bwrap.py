"""Command lines for bubblewrap (the sandbox init) and nsenter (each exec).

One long-lived ``bwrap`` per environment instance creates the namespaces (mount, pid,
ipc, uts, cgroup and net: never the host's network namespace, see
:mod:`posttrainbench.envs.user_net`) and runs ``sleep infinity`` as its only child.
Every ``exec`` then joins those namespaces with ``nsenter``. Why not one ``bwrap`` per
exec: a pid namespace dies with its init, so background processes
started by one exec (``setsid nohup monitor.sh &``) would be killed when it returns,
and a fresh net namespace per exec would hide servers started by earlier execs.
Killing the init at stop() kills every process of the instance at once.

No user namespace is used (bwrap as root would otherwise map only uid 0, so other
users could not exist). Instead the sandbox drops dangerous capabilities: with
CAP_SYS_ADMIN a sandboxed root could remount ``/`` read-write (checked here).

Every process is started with an explicit environment (:data:`HOST_HELPER_ENV` for the
helpers, ``env -i`` for commands): ``/proc/1/environ`` of a sandbox must never hold the
harness's own environment and its API keys. Unprivileged users run with no_new_privs, so
a setuid-root program on the host's ``/usr`` cannot hand them euid 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from posttrainbench.envs.agent_clis import SANDBOX_AGENT_BIN

# The whole environment of the helper processes (bwrap, nsenter, setpriv, slirp4netns):
# nothing of the harness's own environment is passed on.
HOST_HELPER_ENV: dict[str, str] = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

# Read-only host directories a program needs; /etc comes from a per-instance minimal
# copy instead (see instance_fs). /bin, /lib* are symlinks into /usr on modern Debian
# and are recreated as symlinks in the instance root when they are on the host.
SYSTEM_RO_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

# Docker's default capability set minus CAP_MKNOD (no user namespace here, so a block
# device node would give raw disk access) and CAP_NET_RAW (not needed).
KEPT_CAPABILITIES: tuple[str, ...] = (
    "chown",
    "dac_override",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "net_bind_service",
    "sys_chroot",
    "setfcap",
    "audit_write",
)

# procfs files that let host root reconfigure or read the (shared) kernel.
PROC_MASKS: tuple[str, ...] = (
    "/proc/sysrq-trigger",
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/kmsg",
)
PROC_RO_DIRS: tuple[str, ...] = ("/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs")


@dataclass(frozen=True)
class Bind:
    """A host path bound into the sandbox."""

    source: Path
    target: str
    read_only: bool = True
    device: bool = False


@dataclass
class SandboxSpec:
    """Everything needed to start an instance's init process."""

    rootfs: Path
    binds: list[Bind] = field(default_factory=list)
    hostname: str = "sandbox"
    proc_root: Path = Path("/proc")


def gpu_binds(dev_dir: Path = Path("/dev"), proc_root: Path = Path("/proc")) -> list[Bind]:
    """Device binds for NVIDIA GPUs (``/dev/nvidia*``, ``/dev/nvidia-caps``) if present.

    Driver user-space libraries live under ``/usr`` (bound already); ``/proc/driver/nvidia``
    is exposed read-only because CUDA and nvidia-smi read it.
    """
    binds: list[Bind] = []
    if not dev_dir.is_dir():
        return binds
    for path in sorted(dev_dir.glob("nvidia*")):
        binds.append(Bind(path, f"/dev/{path.name}", read_only=False, device=True))
    driver = proc_root / "driver" / "nvidia"
    if binds and driver.is_dir():
        binds.append(Bind(driver, "/proc/driver/nvidia", read_only=True))
    return binds


def _bind_args(bind: Bind) -> list[str]:
    if bind.device:
        flag = "--dev-bind"
    elif bind.read_only:
        flag = "--ro-bind"
    else:
        flag = "--bind"
    return [flag, str(bind.source), bind.target]


def build_init_argv(spec: SandboxSpec, info_fd: int = 3, bwrap: str = "bwrap") -> list[str]:
    """Return the argv of the instance's init: bwrap around ``sleep infinity``.

    The caller passes ``info_fd`` to the child; bwrap writes JSON with the init's host
    pid (``child-pid``) there.
    """
    argv = [
        bwrap,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        spec.hostname,
        "--die-with-parent",
        "--new-session",
        "--unshare-net",
        "--clearenv",
        "--setenv",
        "PATH",
        HOST_HELPER_ENV["PATH"],
        "--cap-drop",
        "ALL",
    ]
    for cap in KEPT_CAPABILITIES:
        argv += ["--cap-add", f"CAP_{cap.upper()}"]
    # The writable instance root is "/", so new top-level dirs created on the host
    # after start (uploads to /tests, /solution, ...) appear inside immediately.
    argv += ["--bind", str(spec.rootfs), "/"]
    for directory in SYSTEM_RO_DIRS:
        if os.path.isdir(directory) and not os.path.islink(directory):
            argv += ["--ro-bind", directory, directory]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for path in PROC_RO_DIRS:
        if (spec.proc_root / Path(path).relative_to("/proc")).exists():
            argv += ["--ro-bind", path, path]
    for path in PROC_MASKS:
        if (spec.proc_root / Path(path).relative_to("/proc")).exists():
            argv += ["--ro-bind", "/dev/null", path]
    # Mount order matters: later binds shadow earlier ones (e.g. the python prefix
    # under /root, the trial log dirs under /logs).
    for bind in sorted(spec.binds, key=lambda b: len(Path(b.target).parts)):
        argv += _bind_args(bind)
    argv += ["--info-fd", str(info_fd), "--", "sleep", "infinity"]
    return argv


def build_exec_argv(
    init_pid: int,
    command: str,
    *,
    cwd: str,
    env: Mapping[str, str],
    uid: int = 0,
    gid: int = 0,
    network_namespace: bool = True,
    extra_groups: Iterable[int] = (),
) -> list[str]:
    """Return the argv that runs ``bash -c command`` inside a running instance.

    ``nsenter`` joins the init's namespaces and root; ``setpriv`` drops capabilities
    and switches user; ``env -i -C`` replaces the host environment and sets the cwd.
    """
    namespaces = ["--mount", "--pid", "--ipc", "--uts"]
    if network_namespace:
        namespaces.append("--net")
    argv = ["nsenter", "--target", str(init_pid), *namespaces, "--root", "--wd", "--"]
    caps = ",".join(f"+{cap}" for cap in KEPT_CAPABILITIES) if uid == 0 else ""
    bounding = "-all" + (f",{caps}" if caps else "")
    argv += ["setpriv", "--bounding-set", bounding, "--inh-caps", "-all"]
    if uid != 0 or gid != 0:
        groups = ",".join(str(g) for g in extra_groups)
        argv += ["--reuid", str(uid), "--regid", str(gid)]
        argv += ["--groups", groups] if groups else ["--clear-groups"]
    if uid != 0:
        argv += ["--no-new-privs"]
    argv += ["--", "env", "-i", "-C", cwd]
    argv += [f"{key}={value}" for key, value in env.items()]
    argv += ["bash", "-c", command]
    return argv


# Only root (gid 0) sees every process: an unprivileged user sees its own, so the agent
# cannot read a candidate's or the service's /proc entries (cmdline, environ, counters).
PROC_HIDEPID_OPTIONS = "hidepid=invisible,gid=0"


def build_hidepid_argv(init_pid: int) -> list[str]:
    """Return the argv that remounts the instance's ``/proc`` with :data:`PROC_HIDEPID_OPTIONS`.

    bwrap's ``--proc`` takes no mount options, and the sandbox's root lacks CAP_SYS_ADMIN,
    so the host (with its full capabilities) remounts it in the instance's mount namespace.
    """
    return [
        "nsenter",
        "--target",
        str(init_pid),
        "--mount",
        "--root",
        "--",
        "mount",
        "-o",
        f"remount,{PROC_HIDEPID_OPTIONS}",
        "/proc",
    ]


def sandbox_base_env() -> dict[str, str]:
    """Environment every sandboxed command starts from (task env vars merge on top)."""
    return {
        # The agent CLIs' bin dir exists only in trials that asked for them (envs.agent_clis).
        "PATH": f"/opt/ptb/venv/bin:/usr/local/bin:/usr/bin:/bin:{SANDBOX_AGENT_BIN}",
        "HOME": "/root",
        "PTB_ROOT": "/opt/ptb",
        "PYTHONPATH": "/opt/ptb/lib",
        "HF_HUB_OFFLINE": "1",
        "VIRTUAL_ENV": "/opt/ptb/venv",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }


def lookup_user(etc_dir: Path, user: str | int) -> tuple[int, int, str]:
    """Resolve ``user`` (name or uid) against the sandbox's ``/etc/passwd``.

    Returns ``(uid, gid, home)``; raises ``ValueError`` if the user does not exist there.
    """
    passwd = etc_dir / "passwd"
    lines: Sequence[str] = passwd.read_text().splitlines() if passwd.is_file() else []
    for line in lines:
        parts = line.split(":")
        if len(parts) < 7:
            continue
        if str(user) in (parts[0], parts[2]):
            return int(parts[2]), int(parts[3]), parts[5]
    if str(user) in ("root", "0"):
        return 0, 0, "/root"
    raise ValueError(
        f"User {user!r} does not exist in the sandbox's /etc/passwd ({passwd}); "
        "the local sandbox can only run commands as users defined there."
    )
