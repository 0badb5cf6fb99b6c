"""Command lines for bubblewrap (the sandbox init) and nsenter (each exec).

One long-lived ``bwrap`` per environment instance creates the namespaces (mount, pid,
ipc, uts, cgroup and net: never the host's network namespace, see
:mod:`posttrainbench.host.envs.user_net`) and runs ``sleep infinity`` as its only child.
Every ``exec`` then joins those namespaces with ``nsenter``. Why not one ``bwrap`` per
exec: a pid namespace dies with its init, so background processes
started by one exec (``setsid nohup monitor.sh &``) would be killed when it returns,
and a fresh net namespace per exec would hide servers started by earlier execs.
Killing the init at stop() kills every process of the instance at once.

No user namespace is used (bwrap as root would otherwise map only uid 0, so other
users could not exist). Instead the sandbox drops dangerous capabilities: with
CAP_SYS_ADMIN a sandboxed root could remount ``/`` read-write (checked here).

Nested instances are the exception. Root inside an instance (a task's trusted process
starting inner instances: an agent task that runs Harbor trials of candidate agents) has
no CAP_SYS_ADMIN, and without it no namespace but a user namespace can be created. So a
harness without CAP_SYS_ADMIN (:func:`has_cap_sys_admin`) starts the init in a new user
namespace (``--unshare-user``) whose uid and gid maps it writes itself, before bwrap goes
on (``--userns-block-fd``): root to root, every other id shifted out of the outer
instance's users (:data:`NESTED_ID_MAP`; bwrap alone maps one id only, and the instance
needs its unprivileged users too). Each ``nsenter``
then joins that user namespace first, which is what permits it the other joins. Mounting
a new ``/proc`` there also needs a fully visible proc mount in the outer instance
(:data:`NESTED_PROC_MOUNT`), see :func:`build_nested_proc_argv`.

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

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.envs.agent_clis import SANDBOX_AGENT_BIN

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
    """Everything needed to start an instance's init process.

    ``user_namespace``: start it in a new user namespace (a nested instance, see the
    module docstring); its caller then writes the id maps (:func:`write_nested_id_maps`).
    """

    rootfs: Path
    binds: list[Bind] = field(default_factory=list)
    hostname: str = "sandbox"
    proc_root: Path = Path("/proc")
    user_namespace: bool = False


_CAP_SYS_ADMIN_BIT = 21

# Written to an instance's uid_map and gid_map when it has its own user namespace. Root is
# root (the instance's files, made by the harness, stay root's), every other id is shifted
# into a range no user of the outer instance has: were inner uid 1001 outer uid 1001 (the
# outer agent's), the outer agent could signal (kill, stop, time) an inner trial's
# processes of that uid, and inner uid 50001 would be a candidate's.
# Writing such maps needs CAP_SETUID/CAP_SETGID in the parent namespace, which root inside
# an instance keeps (KEPT_CAPABILITIES).
NESTED_ID_SHIFT = 100000
NESTED_ID_MAP = f"0 0 1\n1 {NESTED_ID_SHIFT + 1} 65535\n"

# Where a nested_sandboxes instance gets its extra proc mount. Its parent dir is 0700 root:
# the mount's own root dir would show 0555 over a 0700 mount point, so only the parent
# keeps the agent's unprivileged user out.
NESTED_PROC_PARENT = "/run/ptb-nested"
NESTED_PROC_MOUNT = f"{NESTED_PROC_PARENT}/proc"
# subset=pid: the mount has no /proc/sys (nor anything else but the pid dirs), so root
# inside, which is uid 0 of the host, gains no writable sysctl (core_pattern) from it; the
# kernel still counts it as a fully visible proc, which is all the inner bwrap needs.
NESTED_PROC_OPTIONS = "nosuid,nodev,noexec,hidepid=invisible,gid=0,subset=pid"


def has_cap_sys_admin(status_path: Path = Path("/proc/self/status")) -> bool:
    """Whether this process holds CAP_SYS_ADMIN (its ``CapEff``); False inside an instance."""
    for line in status_path.read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN_BIT & 1)
    return False


def write_nested_id_maps(pid: int, proc_root: Path = Path("/proc")) -> None:
    """Write :data:`NESTED_ID_MAP` as the uid and gid maps of ``pid``'s (new, still unmapped)
    user namespace."""
    for name in ("uid_map", "gid_map"):
        (proc_root / str(pid) / name).write_text(NESTED_ID_MAP)


def tun_binds(dev_dir: Path = Path("/dev")) -> list[Bind]:
    """``/dev/net/tun`` as a device bind when the host has it (slirp4netns of inner instances)."""
    tun = dev_dir / "net" / "tun"
    return [Bind(tun, "/dev/net/tun", read_only=False, device=True)] if tun.exists() else []


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


def build_init_argv(
    spec: SandboxSpec,
    info_fd: int = 3,
    bwrap: str = "bwrap",
    userns_block_fd: int | None = None,
) -> list[str]:
    """Return the argv of the instance's init: bwrap around ``sleep infinity``.

    The caller passes ``info_fd`` to the child; bwrap writes JSON with the init's host
    pid (``child-pid``) there. With ``spec.user_namespace`` bwrap then waits until
    ``userns_block_fd`` (required then) is readable: the caller writes the id maps first.
    """
    userns: list[str] = []
    if spec.user_namespace:
        if userns_block_fd is None:
            raise ValueError("an init in its own user namespace needs userns_block_fd")
        userns = ["--unshare-user", "--userns-block-fd", str(userns_block_fd)]
    argv = [
        bwrap,
        *userns,
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
    user_namespace: bool = False,
) -> list[str]:
    """Return the argv that runs ``bash -c command`` inside a running instance.

    ``nsenter`` joins the init's namespaces and root (its user namespace too, when
    ``user_namespace``); ``setpriv`` drops capabilities and switches user; ``env -i -C``
    replaces the host environment and sets the cwd.
    """
    namespaces = ["--user"] if user_namespace else []
    namespaces += ["--mount", "--pid", "--ipc", "--uts"]
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
# The remount names bwrap's flags again: without them it would drop nosuid, nodev, noexec.
PROC_HIDEPID_OPTIONS = "nosuid,nodev,noexec,hidepid=invisible,gid=0"


def _nsenter_prefix(init_pid: int, namespaces: list[str], user_namespace: bool) -> list[str]:
    # Without CAP_SYS_ADMIN (a nested harness) only the owner's user namespace grants the
    # other joins; nsenter retries those after it has joined it.
    joins = ["--user", *namespaces] if user_namespace else namespaces
    return ["nsenter", "--target", str(init_pid), *joins, "--root", "--"]


def build_hidepid_argv(init_pid: int, user_namespace: bool = False) -> list[str]:
    """Return the argv that remounts the instance's ``/proc`` with :data:`PROC_HIDEPID_OPTIONS`.

    bwrap's ``--proc`` takes no mount options, and the sandbox's root lacks CAP_SYS_ADMIN,
    so the host (with its full capabilities) remounts it in the instance's mount namespace.
    """
    return [
        *_nsenter_prefix(init_pid, ["--mount"], user_namespace),
        "mount",
        "-o",
        f"remount,{PROC_HIDEPID_OPTIONS}",
        "/proc",
    ]


def build_nested_proc_argv(init_pid: int, user_namespace: bool = False) -> list[str]:
    """Return the argv that mounts a second proc at :data:`NESTED_PROC_MOUNT` in an instance.

    Inside an instance no new proc can be mounted (bwrap's ``--proc`` of an inner
    instance): the kernel allows a proc mount in a user namespace only where a proc
    mount with no locked mount over any of its entries is already visible, and the
    instance's ``/proc`` has the read-only and /dev/null ones. This one has none. It joins
    the instance's pid namespace, so it shows the instance's processes (hidepid, as
    ``/proc``). The caller makes its 0700 parent dir first.
    """
    return [
        *_nsenter_prefix(init_pid, ["--mount", "--pid"], user_namespace),
        "mount",
        "-t",
        "proc",
        "-o",
        NESTED_PROC_OPTIONS,
        "proc",
        NESTED_PROC_MOUNT,
    ]


def sandbox_base_env() -> dict[str, str]:
    """Environment every sandboxed command starts from (task env vars merge on top)."""
    return {
        # The agent CLIs' bin dir exists only in trials that asked for them (envs.agent_clis).
        "PATH": f"{MODEL_LAYOUT.venv_bin}:/usr/local/bin:/usr/bin:/bin:{SANDBOX_AGENT_BIN}",
        "HOME": "/root",
        "PTB_ROOT": MODEL_LAYOUT.root,
        "PYTHONPATH": MODEL_LAYOUT.lib,
        "HF_HUB_OFFLINE": "1",
        "VIRTUAL_ENV": MODEL_LAYOUT.venv,
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
