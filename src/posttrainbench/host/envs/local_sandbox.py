"""Harbor environment plugin that runs trials on this machine inside bubblewrap.

Use it with ``harbor run --env posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment``.
Each instance (the agent's, and a separate verifier's) gets its own writable root under
the trial dir, a writable overlay over the task's cached layers at ``/opt/ptb``, and its
own pid/ipc/uts/net namespaces; see :mod:`posttrainbench.host.envs.bwrap` for why one
long-lived init per instance and :mod:`posttrainbench.host.envs.env_cache` for the cache.

Nothing of the host is reachable from inside:

- no host directory is bound writable: Harbor's ``/logs/*`` live in the instance's root
  and are copied out by :mod:`posttrainbench.host.envs.transfer`, which follows no link the
  agent planted (``auto_mounting`` is refused);
- network access goes through slirp4netns without the host's loopback
  (:mod:`posttrainbench.host.envs.user_net`); ``--no-network`` gives loopback only;
- every helper starts with an explicit environment, not the harness's.

Every command run as an unprivileged user lives in the instance's agent cgroup
(:mod:`posttrainbench.host.envs.agent_cgroup`); when Harbor cancels such a command (the
agent's deadline), everything in that cgroup is killed at once.

Instances nest: a task whose ``environment/ptb-environment.json`` declares
``nested_sandboxes`` (:mod:`posttrainbench.host.envs.environment_needs`) gets what its root
needs to start instances of its own (an extra proc mount, ``/dev/net/tun``), and a
harness running there, without CAP_SYS_ADMIN, starts its instances in a user namespace
(see :mod:`posttrainbench.host.envs.bwrap`).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import (
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)
from harbor.models.task.config import TaskOS
from harbor.models.trial.config import ResourceMode
from harbor.models.trial.paths import EnvironmentPaths

from posttrainbench.core.secrets_file import SECRETS_PATH
from posttrainbench.host.envs import transfer
from posttrainbench.host.envs.agent_cgroup import AgentCgroup
from posttrainbench.host.envs.agent_clis import (
    SANDBOX_AGENT_CLIS,
    AgentClisError,
    ensure_agent_clis,
)
from posttrainbench.host.envs.bwrap import (
    HOST_HELPER_ENV,
    NESTED_PROC_MOUNT,
    NESTED_PROC_PARENT,
    Bind,
    SandboxSpec,
    build_exec_argv,
    build_hidepid_argv,
    build_init_argv,
    build_nested_proc_argv,
    gpu_binds,
    has_cap_sys_admin,
    lookup_user,
    sandbox_base_env,
    tun_binds,
    write_nested_id_maps,
)
from posttrainbench.host.envs.cache_admin import LayerHolds
from posttrainbench.host.envs.env_cache import (
    SANDBOX_PTB_ROOT,
    acquire_layers,
    cache_root,
    resolve_sandbox_python,
)
from posttrainbench.host.envs.environment_needs import NEEDS_FILE_NAME, load_environment_needs
from posttrainbench.host.envs.instance_fs import InstanceFs
from posttrainbench.host.envs.limits import CgroupLimits, detect_cgroup_mode, join_cgroups_prefix
from posttrainbench.host.envs.ptrace_guard import guarded_argv
from posttrainbench.host.envs.service_secrets import deliver_secrets
from posttrainbench.host.envs.user_net import SANDBOX_NAMESERVER, UserNetwork, check_available

TIMEOUT_RETURN_CODE = 124  # what coreutils `timeout` (and Harbor's singularity) return
_OUTPUT_GRACE_SEC = 1.0


class LocalSandboxEnvironment(BaseEnvironment):
    """A bubblewrap sandbox on the local machine; no Docker, no image build."""

    def __init__(self, *args: Any, agent_clis: bool | str = False, **kwargs: Any) -> None:
        # `--ek agent_clis=true` arrives as a string.
        self._agent_clis = str(agent_clis).lower() in ("1", "true", "yes")
        self._init_proc: asyncio.subprocess.Process | None = None
        self._init_pid: int | None = None
        self._limits: CgroupLimits | None = None
        self._agent_cgroup: AgentCgroup | None = None
        self._network: UserNetwork | None = None
        self._holds: LayerHolds | None = None  # the cached layers this instance runs on
        self._cli_holds: LayerHolds | None = None  # the agent CLIs' entry, when asked for
        # A harness inside an instance (no CAP_SYS_ADMIN) starts its own in a user namespace.
        self._user_namespace = not has_cap_sys_admin()
        super().__init__(*args, **kwargs)
        self._downloader = transfer.Downloader(self.logger)
        safe_id = "".join(c if c.isalnum() or c in "-._" else "_" for c in self.session_id)
        host_mounts = {
            str(m["target"]): Path(m["source"])
            for m in self._host_mounts
            if m.get("type", "bind") == "bind"
        }
        self._fs = InstanceFs(
            self.trial_paths.trial_dir / "sandbox" / safe_id,
            host_mounts=host_mounts,
            logger=self.logger,
        )

    @staticmethod
    def type() -> str:
        """Identifier of this environment type."""
        return "posttrainbench-local-sandbox"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        """GPUs only where /dev/nvidia* exists; no allowlist networking; no host log mounts."""
        return EnvironmentCapabilities(
            gpus=bool(gpu_binds()),
            disable_internet=True,
            mounted=False,
        )

    @classmethod
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        """Limits are offered only when a writable cgroup hierarchy exists."""
        enforced = detect_cgroup_mode() is not None
        return EnvironmentResourceCapabilities(
            cpu_limit=enforced, memory_limit=enforced, fractional_cpus=True
        )

    def _validate_definition(self) -> None:
        if self.task_env_config.os == TaskOS.WINDOWS:
            raise RuntimeError("The local sandbox runs Linux tasks only.")
        if not self.environment_dir.is_dir():
            raise FileNotFoundError(f"Environment dir {self.environment_dir} not found")
        if shutil.which("bwrap") is None:
            raise RuntimeError(
                "bubblewrap (`bwrap`) is not installed; `apt-get install bubblewrap`."
            )
        if not self._network_disabled:
            check_available(nested=not has_cap_sys_admin())
        for mount in self._mounts:
            if mount.get("type", "bind") != "bind":
                raise ValueError(
                    f"The local sandbox supports bind mounts only, got {mount['type']!r} "
                    f"for {mount['target']}"
                )

    # ------------------------------------------------------------------ lifecycle

    async def start(self, force_build: bool) -> None:
        """Build (or reuse) the cached layers of the environment, create the root, start the init.

        ``force_build`` is ignored: cache entries are content-addressed and shared by
        running trials, so they are never rebuilt in place.
        """
        needs = await asyncio.to_thread(load_environment_needs, self.environment_dir)
        python = await asyncio.to_thread(resolve_sandbox_python, needs.min_python_version)
        if self._holds is not None:  # started again: the earlier start's holds
            self._holds.release()
        layers, built, self._holds = await asyncio.to_thread(
            acquire_layers, self.environment_dir, python
        )
        self.logger.debug("task environment layers %s (built now: %s)", layers, built or "none")
        workspace = self.environment_dir / "workspace"
        paths = EnvironmentPaths.for_os(self.os)
        log_dirs = [str(d) for d in (paths.agent_dir, paths.verifier_dir, paths.artifacts_dir)]
        extra_dirs = [
            d
            for d in dict.fromkeys([*log_dirs, *map(str, self._mount_targets())])
            if d not in self._fs.host_mounts
        ]
        await asyncio.to_thread(self._fs.create, workspace, extra_dirs)
        await asyncio.to_thread(self._fs.make_traversable, python.prefix)
        if not self._network_disabled:
            await asyncio.to_thread(self._fs.use_nameserver, SANDBOX_NAMESERVER)
        mode = await asyncio.to_thread(self._fs.setup_ptb, layers)
        self.logger.debug("%s layer: %s", SANDBOX_PTB_ROOT, mode)
        # Unique on this host: two instances with one session id (two jobs, two test runs)
        # must never share a cgroup, where one's stop would kill the other's processes.
        cgroup_name = f"{self._fs.instance_dir.name}-{secrets.token_hex(4)}"
        self._limits = CgroupLimits(
            cgroup_name,
            self._resource_limit_value("cpu", auto_mode=ResourceMode.LIMIT),
            self._resource_limit_value("memory", auto_mode=ResourceMode.LIMIT),
            self.logger,
        )
        self._limits.create()
        v2_limits = (
            self._limits.dirs[0] if self._limits.mode == "v2" and self._limits.dirs else None
        )
        self._agent_cgroup = AgentCgroup(cgroup_name, self.logger, v2_parent=v2_limits)
        self._agent_cgroup.create()
        binds = [
            Bind(python.prefix, str(python.prefix), read_only=True),
            Bind(self._fs.ptb_merged, SANDBOX_PTB_ROOT, read_only=False),
        ]
        if self._agent_clis:
            binds.append(Bind(await self._hold_agent_clis(), SANDBOX_AGENT_CLIS, read_only=True))
        for mount in self._host_mounts:
            Path(mount["source"]).mkdir(parents=True, exist_ok=True)
            binds.append(
                Bind(Path(mount["source"]), str(mount["target"]), bool(mount.get("read_only")))
            )
        if self._effective_gpus > 0:
            binds += gpu_binds()
        if needs.nested_sandboxes:
            # For the slirp4netns of inner instances with network. Harmless here: without
            # CAP_NET_ADMIN over this instance's network, root here cannot make a device.
            binds += tun_binds()
            await asyncio.to_thread(_make_nested_proc_dir, self._fs.rootfs)
        spec = SandboxSpec(rootfs=self._fs.rootfs, binds=binds, user_namespace=self._user_namespace)
        await self._start_init(spec)
        await self._hide_other_users_processes()
        if needs.nested_sandboxes:
            await self._mount_nested_proc()
        if not self._network_disabled and self._init_pid is not None:
            self._network = UserNetwork(self._fs.instance_dir / "slirp4netns.log", self.logger)
            await self._network.start(self._init_pid, self._user_namespace)
        result = await self.exec("true", timeout_sec=30, user="root")
        if result.return_code != 0:
            raise RuntimeError(f"Sandbox did not start: {result.stderr}")
        # Before Harbor's healthcheck, which starts an agent task's service.
        await deliver_secrets(self)

    async def _hold_agent_clis(self) -> Path:
        """The agent CLIs' cache entry, installed first if missing, held until stop()."""
        envs_dir = cache_root() / "envs"
        for _ in range(3):
            entry, installed = await asyncio.to_thread(
                ensure_agent_clis, self.environment_dir, envs_dir
            )
            if installed:
                self.logger.info("installed the agent CLIs into %s", entry)
            self._cli_holds = LayerHolds([entry])
            if await asyncio.to_thread(self._cli_holds.acquire):
                return entry
        raise AgentClisError(
            f"the agent CLIs in {envs_dir} were pruned each time they were installed"
        )

    async def _hide_other_users_processes(self) -> None:
        if self._init_pid is None:
            return
        await _run_helper(
            build_hidepid_argv(self._init_pid, self._user_namespace),
            "could not hide other users' processes in the sandbox",
        )

    async def _mount_nested_proc(self) -> None:
        """The proc mount that lets root inside start instances of its own (bwrap's --proc)."""
        if self._init_pid is None:
            return
        await _run_helper(
            build_nested_proc_argv(self._init_pid, self._user_namespace),
            f"the task declares nested_sandboxes, but {NESTED_PROC_MOUNT} could not be mounted",
        )
        self.logger.debug("nested sandboxes: proc mounted at %s", NESTED_PROC_MOUNT)

    async def _start_init(self, spec: SandboxSpec) -> None:
        read_fd, write_fd = os.pipe()
        # In a user namespace bwrap waits on this pipe until we have written the id maps.
        block_read, block_write = os.pipe() if spec.user_namespace else (None, None)
        argv = build_init_argv(spec, info_fd=write_fd, userns_block_fd=block_read)
        prefix = self._limits.argv_prefix() if self._limits else []
        log = (self._fs.instance_dir / "init.log").open("ab")
        try:
            self._init_proc = await asyncio.create_subprocess_exec(
                *prefix,
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(write_fd,) if block_read is None else (write_fd, block_read),
                env=HOST_HELPER_ENV,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
            if block_read is not None:
                os.close(block_read)
            log.close()
        try:
            info = await asyncio.wait_for(asyncio.to_thread(_read_info, read_fd), 60)
        finally:
            os.close(read_fd)
        if info is not None and block_write is not None:
            try:
                write_nested_id_maps(int(info["child-pid"]))
                os.write(block_write, b"1")
            except OSError as exc:
                _kill(self._init_proc.pid)
                raise RuntimeError(
                    f"could not map the ids of the sandbox's user namespace: {exc}"
                ) from exc
            finally:
                os.close(block_write)
        elif block_write is not None:
            os.close(block_write)
        if info is None:
            await self._init_proc.wait()
            raise RuntimeError(self._init_failure(spec))
        self._init_pid = int(info["child-pid"])
        # bwrap reports the pid before it has finished mounting; the sandbox is ready
        # once its init has forked the command (`sleep infinity`).
        deadline = time.monotonic() + 30
        while not _has_sleep_child(self._init_pid):
            if self._init_proc.returncode is not None:
                raise RuntimeError(self._init_failure(spec))
            if time.monotonic() > deadline:
                raise RuntimeError(f"bwrap sandbox init {self._init_pid} did not come up")
            await asyncio.sleep(0.01)

    def _init_failure(self, spec: SandboxSpec) -> str:
        """Why the init exited, from its log (bwrap's own error line)."""
        log_text = (self._fs.instance_dir / "init.log").read_text(errors="replace").strip()
        if spec.user_namespace and "mount proc" in log_text:
            # The one way a nested start fails that its task can fix.
            log_text += (
                " (inside a sandbox instance: the outer task must declare nested_sandboxes "
                f"in environment/{NEEDS_FILE_NAME})"
            )
        return f"bwrap failed to start the sandbox: {log_text}"

    async def stop(self, delete: bool) -> None:
        """Kill every process of the instance; delete its writable dirs if ``delete``.

        Delivered secrets are removed either way: the root lives in the trial dir.
        """
        if self._init_pid is not None:
            # SIGKILL to the pid namespace's init makes the kernel kill all its members.
            _kill(self._init_pid)
        if self._init_proc is not None and self._init_proc.returncode is None:
            _kill(self._init_proc.pid)
            try:
                await asyncio.wait_for(self._init_proc.wait(), 10)
            except TimeoutError:
                self.logger.warning("sandbox init %s did not exit", self._init_proc.pid)
        if self._network is not None:
            await self._network.stop()
            self._network = None
        if self._agent_cgroup is not None:
            await asyncio.to_thread(self._agent_cgroup.remove)
        if self._limits is not None:
            for _ in range(50):
                pids = self._limits.pids()
                if not pids:
                    break
                for pid in pids:
                    _kill(pid)
                await asyncio.sleep(0.1)
            self._limits.remove()
        await self._wait_namespace_gone()
        self._init_pid = None
        await asyncio.to_thread(self._fs.unmount_ptb)
        if self._holds is not None:  # from now on `ptb cache prune` may remove them
            self._holds.release()
        if self._cli_holds is not None:
            self._cli_holds.release()
        await asyncio.to_thread(_remove_secrets, self._fs)
        if delete:
            await asyncio.to_thread(self._fs.delete)

    async def _wait_namespace_gone(self) -> None:
        if self._init_pid is None:
            return
        deadline = time.monotonic() + 10
        while Path(f"/proc/{self._init_pid}").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ exec

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run ``bash -c command`` in the instance; rc 124 and a note on timeout."""
        if self._init_pid is None:
            raise RuntimeError("The sandbox is not running; call start() first.")
        resolved = self._resolve_user(user)
        uid, gid, home = lookup_user(
            self._fs.rootfs / "etc", resolved if resolved is not None else 0
        )
        merged = {**sandbox_base_env(), **(self._merge_env(env) or {})}
        if uid != 0:
            merged["HOME"] = home
        argv = build_exec_argv(
            self._init_pid,
            command,
            cwd=cwd or self.task_env_config.workdir or "/app",
            env=merged,
            uid=uid,
            gid=gid,
            network_namespace=True,
            user_namespace=self._user_namespace,
        )
        if self._user_namespace:
            # A nested instance runs a Mode B inner trial: its root is an untrusted candidate,
            # who must not take over a process the proxy's sweep spares (envs.ptrace_guard).
            argv = guarded_argv(argv)
        # An unprivileged user's command, and all it starts, lives in the agent cgroup.
        agent_group = self._agent_cgroup.dir if uid != 0 and self._agent_cgroup else None
        prefix = join_cgroups_prefix(
            [*(self._limits.dirs if self._limits else []), *([agent_group] if agent_group else [])]
        )
        callback = self._output_callback()
        chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        # Our own pipes instead of asyncio.subprocess.PIPE: asyncio's Process.wait()
        # only returns once the pipes close, and a background child (`server &`) may
        # hold them open for ever. We wait for the exit, then drain briefly.
        readers: list[asyncio.Task[None]] = []
        transports: list[asyncio.BaseTransport] = []
        write_fds: list[int] = []
        loop = asyncio.get_running_loop()
        for name in ("stdout", "stderr"):
            read_fd, write_fd = os.pipe()
            write_fds.append(write_fd)
            stream = asyncio.StreamReader()
            transport, _ = await loop.connect_read_pipe(
                lambda s=stream: asyncio.StreamReaderProtocol(s),  # type: ignore[misc]
                os.fdopen(read_fd, "rb", 0),
            )
            transports.append(transport)
            readers.append(asyncio.create_task(_pump(stream, chunks[name], name, callback)))
        try:
            proc = await asyncio.create_subprocess_exec(
                *prefix,
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fds[0],
                stderr=write_fds[1],
                env=HOST_HELPER_ENV,
                start_new_session=True,  # its own process group: a timeout kills the tree
            )
        finally:
            for fd in write_fds:
                os.close(fd)
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout_sec)
        except TimeoutError:
            timed_out = True
            _killpg(proc.pid)
            await proc.wait()
        except asyncio.CancelledError:
            _killpg(proc.pid)
            if agent_group is not None:
                # Harbor cancels the agent's command at its deadline: nothing the agent
                # started may run on (and write into final_model) after it.
                self._agent_cgroup.kill()  # type: ignore[union-attr]
            raise
        finally:
            _, pending = await asyncio.wait(readers, timeout=_OUTPUT_GRACE_SEC)
            for task in pending:
                task.cancel()
            for transport in transports:
                transport.close()
        stdout = b"".join(chunks["stdout"]).decode(errors="replace")
        stderr = b"".join(chunks["stderr"]).decode(errors="replace")
        if timed_out:
            stderr += f"\nCommand timed out after {timeout_sec} seconds"
            return ExecResult(stdout=stdout, stderr=stderr, return_code=TIMEOUT_RETURN_CODE)
        return ExecResult(stdout=stdout, stderr=stderr, return_code=proc.returncode or 0)

    # ------------------------------------------------------------------ file transfer

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a host file to ``target_path`` in the instance, following no link there."""
        root, relative = self._fs.locate(target_path)
        await asyncio.to_thread(transfer.upload_file, Path(source_path), root, relative)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy the contents of a host dir into ``target_dir`` (merging), following no link there."""
        root, relative = self._fs.locate(target_dir)
        await asyncio.to_thread(transfer.upload_dir, Path(source_dir), root, relative)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a regular sandbox file to the host, reached without following links."""
        root, relative = self._fs.locate(source_path)
        await asyncio.to_thread(self._downloader.download_file, root, relative, Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a sandbox dir's directories and regular files to the host (links are not copied)."""
        root, relative = self._fs.locate(source_dir)
        await asyncio.to_thread(self._downloader.download_dir, root, relative, Path(target_dir))


async def _pump(
    stream: asyncio.StreamReader,
    sink: list[bytes],
    name: str,
    callback: Any,
) -> None:
    while data := await stream.read(65536):
        sink.append(data)
        if callback is not None:
            await callback(data.decode(errors="replace"), name)


async def _run_helper(argv: list[str], failure: str) -> None:
    """Run a host helper (nsenter ...) with the helper environment; raise ``failure: output``."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=HOST_HELPER_ENV,
    )
    output, _ = await asyncio.wait_for(proc.communicate(), 30)
    if proc.returncode != 0:
        raise RuntimeError(f"{failure}: {output.decode().strip()}")


def _make_nested_proc_dir(rootfs: Path) -> None:
    """Make the extra proc mount's point below a 0700 root-owned dir, before the init starts.

    The fresh root holds nothing the agent made yet, so no link is followed here.
    """
    parent = rootfs / NESTED_PROC_PARENT.lstrip("/")
    if parent.parent.is_symlink():  # a workspace or mount target could only make a dir
        raise RuntimeError(f"{parent.parent} is a link; cannot mount the nested proc below it")
    parent.parent.mkdir(mode=0o755, exist_ok=True)
    parent.mkdir(mode=0o700)
    os.chmod(parent, 0o700)
    (rootfs / NESTED_PROC_MOUNT.lstrip("/")).mkdir(mode=0o555)


def _remove_secrets(fs: InstanceFs) -> None:
    try:
        root, relative = fs.locate(SECRETS_PATH)
        transfer.remove_file(root, relative)
    except OSError:
        pass  # a root that was never created


def _read_info(fd: int) -> dict[str, Any] | None:
    """Read bwrap's ``--info-fd`` JSON (None if bwrap exited without writing it)."""
    data = b""
    decoder = json.JSONDecoder()
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
        try:
            value, _ = decoder.raw_decode(data.decode())
            return value
        except ValueError:
            continue


def _has_sleep_child(pid: int) -> bool:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return any(Path(f"/proc/{child}/comm").read_text().strip() == "sleep" for child in children)
    except OSError:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
