"""Tests of the bubblewrap local sandbox (real bwrap, no mocks; seconds each)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
from pathlib import Path

import pytest
from harbor.models.task.config import NetworkMode

from posttrainbench.host.envs.env_cache import (
    EnvironmentBuildError,
    ensure_layers,
    plan_layers,
    resolve_sandbox_python,
)
from tests.sandbox_support import MakeEnv, requires_bwrap, run, write_task_env

pytestmark = [requires_bwrap, pytest.mark.environment]


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _host_pids_matching(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(entry.name))
    return pids


async def _pids_appear(marker: str, count: int, timeout: float = 10.0) -> list[int]:
    """The host pids whose command line holds *marker*, once there are *count* of them (or
    after *timeout*): a process the shell started in the background may be mid-exec when
    the shell returns, its command line empty for that moment (seen once in a full test
    run: none found)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(found := _host_pids_matching(marker)) < count:
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.05)
    return found


def test_exec_stdout_rc_cwd_env(make_env: MakeEnv) -> None:
    async def body() -> None:
        env = make_env(persistent_env={"PERSIST": "p"})
        await env.start(force_build=False)
        try:
            result = await env.exec("echo hello; echo oops >&2; exit 3")
            assert (result.stdout, result.stderr, result.return_code) == ("hello\n", "oops\n", 3)
            assert (await env.exec("pwd")).stdout == "/app\n"
            assert (await env.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
            result = await env.exec('echo "$FOO $PERSIST $HOME $PTB_ROOT"', env={"FOO": "bar"})
            assert result.stdout == "bar p /root /opt/ptb\n"
            result = await env.exec(
                "python -c 'import sys, ptbhelper; print(sys.prefix, ptbhelper.VALUE)'"
            )
            assert result.stdout == "/opt/ptb/venv 42\n", result.stderr
            assert (await env.exec("cat /opt/ptb/models/base")).stdout == "base\n"
        finally:
            await env.stop(delete=True)

    run(body())


def test_timeout_kills_process_tree(make_env: MakeEnv) -> None:
    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        try:
            result = await env.exec("sleep 61 & sleep 62; echo never", timeout_sec=1)
            assert result.return_code == 124
            assert "never" not in (result.stdout or "")
            ps = await env.exec("ps -eo args")
            assert "sleep 61" not in ps.stdout and "sleep 62" not in ps.stdout
        finally:
            await env.stop(delete=True)

    run(body())


def test_agent_cannot_write_outside_its_roots(
    make_env: MakeEnv, task_env_dir: Path, sandbox_cache: Path
) -> None:
    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        (layer,) = plan_layers(task_env_dir, resolve_sandbox_python())  # no manifest: one layer
        entry = layer.entry
        before = _tree_digest(entry)
        try:
            assert (await env.exec("touch /usr/evil")).return_code != 0
            assert (await env.exec("mount -o remount,rw /usr")).return_code != 0
            result = await env.exec(
                "echo tampered > /opt/ptb/venv/pyvenv.cfg && rm -rf /opt/ptb/models "
                "&& echo x > /opt/ptb/new && cat /opt/ptb/venv/pyvenv.cfg"
            )
            assert result.stdout == "tampered\n", result.stderr
            # The host task dir (with sealed tests), /work, host /root and /tmp are hidden.
            for path in (task_env_dir.parent, Path("/work"), Path.home() / ".cache"):
                assert (await env.exec(f"test -e {path}")).return_code == 1, path
            assert (await env.exec("ls -A /tmp")).stdout == ""
            assert (await env.exec("test -e /etc/shadow")).return_code == 1
        finally:
            await env.stop(delete=True)
        assert _tree_digest(entry) == before
        assert not Path("/usr/evil").exists()

    run(body())


def test_agent_pip_install_stays_in_its_layer(
    make_env: MakeEnv, sandbox_cache: Path, tmp_path: Path
) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='ptbdemo', version='0.1', py_modules=['ptbdemo'])\n"
    )
    (pkg / "ptbdemo.py").write_text("X = 7\n")

    async def body() -> None:
        agent, other = make_env("trial__env"), make_env("trial__verifier__x")
        await agent.start(force_build=False)
        await other.start(force_build=False)
        try:
            await agent.upload_dir(pkg, "/app/pkg")
            result = await agent.exec(
                "pip install --no-index --no-build-isolation -q /app/pkg "
                "&& cd / && python -c 'import ptbdemo; print(ptbdemo.X)'",
                timeout_sec=120,
            )
            assert result.stdout.strip().endswith("7"), result.stderr
            result = await other.exec("python -c 'import ptbdemo'")
            assert result.return_code != 0
        finally:
            await agent.stop(delete=True)
            await other.stop(delete=True)
        assert not list((sandbox_cache / "envs").rglob("ptbdemo*"))

    run(body())


def test_verifier_instance_sees_pristine_app(make_env: MakeEnv, tmp_path: Path) -> None:
    async def body() -> None:
        agent = make_env("trial__env")
        await agent.start(force_build=False)
        await agent.exec("echo 'print(\"hacked\")' > /app/evaluate.py; echo s > /root/stash")
        verifier = make_env("trial__verifier__final")
        await verifier.start(force_build=False)
        try:
            assert (await verifier.exec("python /app/evaluate.py")).stdout == "pristine\n"
            assert (await verifier.exec("test -e /root/stash")).return_code == 1
            assert (await agent.exec("python /app/evaluate.py")).stdout == "hacked\n"
            # Only what Harbor uploads reaches the verifier.
            (tmp_path / "up").mkdir()
            (tmp_path / "up" / "test.sh").write_text("echo tests\n")
            await verifier.upload_dir(tmp_path / "up", "/tests")
            assert (await verifier.exec("bash /tests/test.sh")).stdout == "tests\n"
            assert (await agent.exec("test -e /tests")).return_code == 1
        finally:
            await agent.stop(delete=True)
            await verifier.stop(delete=True)

    run(body())


def test_background_process_survives_exec_and_dies_at_stop(make_env: MakeEnv) -> None:
    marker = "4242.5"

    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        result = await env.exec(f"setsid nohup sleep {marker} > /tmp/bg.log 2>&1 &", timeout_sec=10)
        assert result.return_code == 0
        # no redirect: a background child that keeps the pipes open must not block
        await env.exec(f"sleep {marker}1 &", timeout_sec=10)
        assert f"sleep {marker}" in (await env.exec("ps -eo args")).stdout
        assert len(await _pids_appear(f"sleep {marker}", 2)) == 2
        await env.stop(delete=True)
        assert _host_pids_matching(f"sleep {marker}") == []
        assert not env._fs.instance_dir.exists()

    run(body())


def test_uploads_and_downloads_follow_no_planted_link(make_env: MakeEnv, tmp_path: Path) -> None:
    """Nothing of the host is bound: /logs/* are copied out, and no copy follows a link."""
    canary = tmp_path / "host-canary.txt"
    canary.write_text("host secret\n")

    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        try:
            source = tmp_path / "f.txt"
            source.write_text("data")
            await env.upload_file(source, "/installed-agent/deep/f.txt")
            assert (await env.exec("cat /installed-agent/deep/f.txt")).stdout == "data"
            await env.exec(
                "mkdir -p /app/out && echo r > /app/out/r.txt && echo v > /logs/verifier/reward.txt"
            )
            await env.download_dir("/app/out", tmp_path / "out")
            assert (tmp_path / "out" / "r.txt").read_text() == "r\n"
            # /logs/verifier is the instance's own dir, not the trial's host dir.
            assert not (env.trial_paths.verifier_dir / "reward.txt").exists()
            await env.download_dir("/logs/verifier", env.trial_paths.verifier_dir)
            assert (env.trial_paths.verifier_dir / "reward.txt").read_text() == "v\n"
            # Links planted inside the sandbox, aimed at a host file.
            await env.exec(
                f"ln -s {canary} /logs/agent/exit-code.txt && ln -s {canary.parent} /logs/agent/dir"
                f" && ln -s {canary} /app/out/leak.txt && mkdir -p /app/up && ln -s {canary} /app/up/f.txt"
            )
            await env.download_dir("/logs/agent", env.trial_paths.agent_dir)
            assert not os.path.lexists(env.trial_paths.agent_dir / "exit-code.txt")
            assert not os.path.lexists(env.trial_paths.agent_dir / "dir")
            await env.download_dir("/app/out", tmp_path / "out2")
            assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == [
                "ptb_transfer_refused.json",
                "r.txt",
            ]
            with pytest.raises(OSError):
                await env.download_file("/app/out/leak.txt", tmp_path / "leak.txt")
            assert not (tmp_path / "leak.txt").exists()
            # An upload replaces the planted link instead of writing through it.
            await env.upload_file(source, "/app/up/f.txt")
            await env.upload_dir(tmp_path / "out", "/logs/agent/dir")
            assert (
                await env.exec("cat /app/up/f.txt; test -L /app/up/f.txt || echo plain")
            ).stdout == "dataplain\n"
            assert (await env.exec("cat /logs/agent/dir/r.txt")).stdout == "r\n"
            # A file host code wrote into the trial dir is not replaced by the sandbox's.
            (env.trial_paths.agent_dir / "host.txt").write_text("host\n")
            await env.exec("echo sandbox > /logs/agent/host.txt")
            await env.download_dir("/logs/agent", env.trial_paths.agent_dir)
            assert (env.trial_paths.agent_dir / "host.txt").read_text() == "host\n"
        finally:
            await env.stop(delete=True)
        assert (
            canary.read_text() == "host secret\n"
            and not (tmp_path / "host-canary.txt.bak").exists()
        )

    run(body())


def test_no_network_mode_has_only_loopback(make_env: MakeEnv) -> None:
    async def body() -> None:
        env = make_env(network=NetworkMode.NO_NETWORK)
        await env.start(force_build=False)
        try:
            result = await env.exec("ls /sys/class/net 2>/dev/null || cat /proc/net/dev")
            assert "lo" in result.stdout
            assert "eth0" not in result.stdout
        finally:
            await env.stop(delete=True)

    run(body())


def test_unknown_user_is_a_clear_error(make_env: MakeEnv) -> None:
    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        try:
            with pytest.raises(ValueError, match="does not exist in the sandbox"):
                await env.exec("id", user="nobody-here")
            result = await env.exec("id -u", user="root")
            assert result.stdout == "0\n"
        finally:
            await env.stop(delete=True)

    run(body())


def test_build_cache_is_reused(task_env_dir: Path, sandbox_cache: Path) -> None:
    python = resolve_sandbox_python()
    (entry,), built = ensure_layers(task_env_dir, python)  # no layer manifest: one layer
    assert not built  # the module's earlier tests built it already
    mtime = entry.stat().st_mtime_ns
    (entry2,), built2 = ensure_layers(task_env_dir, python)
    assert (entry2, built2, entry2.stat().st_mtime_ns) == (entry, [], mtime)


def test_failing_build_is_clear_and_leaves_no_entry(tmp_path: Path, sandbox_cache: Path) -> None:
    env_dir = write_task_env(tmp_path / "bad", build_sh="echo converting; exit 7\n")
    (sandbox_cache / "envs").mkdir(exist_ok=True)
    before = set((sandbox_cache / "envs").iterdir())
    with pytest.raises(EnvironmentBuildError, match=r"build\.sh failed.*Build log: ") as info:
        ensure_layers(env_dir, resolve_sandbox_python())
    log = Path(str(info.value).split("Build log: ")[1])
    assert "converting" in log.read_text()
    new = set((sandbox_cache / "envs").iterdir()) - before
    # Only the lock file and the kept log: no cache entry, no half-built temp dir.
    assert {p.name for p in new if p.is_dir()} <= {"failed"}, new
    assert not [p for p in new if p.name.startswith(".build-")]
    assert os.path.isfile(log)


def test_non_root_user_from_sandbox_passwd(make_env: MakeEnv) -> None:
    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        try:
            result = await env.exec("id -u; echo $HOME; touch /usr/x", user="nobody")
            assert result.stdout.splitlines()[0] == "65534", result
            assert result.return_code != 0
        finally:
            await env.stop(delete=True)

    if "nobody:" not in Path("/etc/passwd").read_text():
        pytest.skip("no 'nobody' user on this host")
    run(body())


def test_cgroup_limits_applied_when_available(make_env: MakeEnv) -> None:
    from posttrainbench.host.envs.limits import detect_cgroup_mode

    if detect_cgroup_mode() is None:
        pytest.skip("no writable cgroup hierarchy here: limits are not enforced")

    async def body() -> None:
        env = make_env()
        env.task_env_config.memory_mb = 512
        env.task_env_config.cpus = 64  # more than the host has: capped, still runs
        await env.start(force_build=False)
        try:
            limits = env._limits
            assert limits is not None and limits.dirs
            result = await env.exec("sleep 5 & echo started", timeout_sec=10)
            assert result.stdout == "started\n"
            assert limits.pids()
            if limits.mode == "v1":
                mem = next(d for d in limits.dirs if "memory" in d.parts)
                assert int((mem / "memory.limit_in_bytes").read_text()) == 512 * 1024 * 1024
        finally:
            await env.stop(delete=True)
        assert not any(d.exists() for d in limits.dirs)

    run(body())


def test_sandbox_processes_hold_none_of_the_harness_environment(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-environ-4711")

    async def body() -> str:
        env = make_env()
        await env.start(force_build=False)
        try:
            result = await env.exec(
                "cat /proc/1/environ /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; env",
                user="nobody",
            )
            root = await env.exec("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
            return result.stdout + root.stdout
        finally:
            await env.stop(delete=True)

    seen = run(body())
    assert "PATH=" in seen and "sk-canary-environ-4711" not in seen


def _host_address() -> str | None:
    """A non-loopback IPv4 address of this host, if it has one."""
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.123", 9))  # no packet is sent; picks the outbound interface
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_network_reaches_out_but_not_the_hosts_loopback(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    import threading

    from posttrainbench.host.envs.host_addresses import HOST_ALLOW_ENV, format_allowance

    hits: list[str] = []
    servers = []
    for address in ("127.0.0.1", _host_address()):
        if address is None:
            continue
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind((address, 0))
        server.listen(8)
        servers.append(server)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0ptb-test-abstract-canary")
    abstract.listen(8)
    servers.append(abstract)

    def accept(server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            hits.append(str(server.getsockname()))
            conn.close()

    for server in servers:
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    probe = (
        "import socket, sys\n"
        "def tcp(h, p):\n"
        "    try:\n"
        "        socket.create_connection((h, int(p)), timeout=3).close(); return 'open'\n"
        "    except OSError as e: return type(e).__name__\n"
        "def unix(name):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    try:\n"
        "        s.connect(name); return 'open'\n"
        "    except OSError as e: return type(e).__name__\n"
        "args = sys.argv[1:]\n"
        "print(' '.join(tcp(h, p) for h, p in zip(args[::2], args[1::2])), unix('\\0ptb-test-abstract-canary'))\n"
    )
    targets = []
    for server in servers[:-1]:
        host, port = server.getsockname()
        targets += [host, str(port)]
        if host != "127.0.0.1":  # the host's addresses are blocked but for an allowed port
            monkeypatch.setenv(HOST_ALLOW_ENV, format_allowance(host, port))
        if host == "127.0.0.1":
            targets += [
                "10.0.2.2",
                str(port),
            ]  # slirp's gateway, which would be the host's loopback

    async def body(network: NetworkMode) -> str:
        env = make_env(network=network)
        await env.start(force_build=False)
        try:
            result = await env.exec(
                f"python3 -c {shlex.quote(probe)} {' '.join(targets)}", user="nobody"
            )
            return result.stdout.strip() or result.stderr
        finally:
            await env.stop(delete=True)

    try:
        public = run(body(NetworkMode.PUBLIC)).split()
        offline = run(body(NetworkMode.NO_NETWORK)).split()
    finally:
        for server in servers:
            server.close()
    loopback, gateway = public[0], public[1]
    assert loopback != "open" and gateway != "open", public
    assert public[-1] != "open" and offline[-1] != "open", (public, offline)
    if len(public) == 4:  # an allowed port of the host: reachable with network, not without
        assert public[2] == "open" and offline[2] != "open", (public, offline)
    assert not [hit for hit in hits if "127.0.0.1" in hit or "abstract" in hit], hits


def test_cancelled_agent_command_takes_all_it_started_with_it(make_env: MakeEnv) -> None:
    """A SIGTERM-ignoring, double-forked writer started by an unprivileged user dies when
    Harbor cancels that user's command (the agent's deadline); root's processes do not."""
    daemon = (
        "( trap '' TERM HUP; setsid bash -c 'trap \"\" TERM HUP; "
        "while true; do date +%s%N >> /tmp/late.txt; sleep 0.05; done' & ) ; sleep 300"
    )

    async def body() -> tuple[str, str, str]:
        env = make_env()
        await env.start(force_build=False)
        try:
            await env.exec("sleep 400 & echo root-bg", timeout_sec=10)
            task = asyncio.ensure_future(env.exec(daemon, user="nobody"))
            await asyncio.sleep(1.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            first = (await env.exec("wc -l < /tmp/late.txt")).stdout
            await asyncio.sleep(1.0)
            second = (await env.exec("wc -l < /tmp/late.txt")).stdout
            procs = (await env.exec("ps -eo user:12,args")).stdout
            return first, second, procs
        finally:
            await env.stop(delete=True)

    first, second, procs = run(body())
    assert int(first) > 0 and first == second, (first, second)
    alive = [line for line in procs.splitlines() if "<defunct>" not in line]
    assert not [line for line in alive if line.startswith("nobody")] and "sleep 400" in procs, procs


def test_stop_user_kills_every_process_of_the_user_and_no_other(
    make_env: MakeEnv, tmp_path: Path
) -> None:
    """The collect hook's stop (task/sandbox/stop_user.py, run as root in the sandbox): by uid,
    whatever the processes did to detach, ignore signals or look like something else."""
    from posttrainbench.task.sandbox import stop_user

    daemons = (
        "for name in a b; do ( trap '' TERM HUP; setsid bash -c \"exec -a '[kworker/$name]' "
        'bash -c \'trap \\"\\" TERM HUP; while true; do sleep 0.1; done\'" & ); done; '
        "nohup sleep 500 > /dev/null 2>&1 &"
    )

    async def body() -> tuple[str, str]:
        env = make_env()
        await env.start(force_build=False)
        try:
            await env.upload_file(Path(stop_user.__file__), "/opt/stop_user.py")
            await env.exec("sleep 400 > /dev/null 2>&1 &", timeout_sec=10)
            await env.exec(daemons, user="nobody", timeout_sec=10)
            before = (await env.exec("ps -eo user=,stat= | grep -c '^nobody .*[SR]'")).stdout
            stopped = await env.exec("python -P /opt/stop_user.py --user nobody", timeout_sec=60)
            assert stopped.return_code == 0, stopped.stderr
            procs = (await env.exec("ps -eo user=,stat=,args=")).stdout
            return before + stopped.stdout, procs
        finally:
            await env.stop(delete=True)

    counts, procs = run(body())
    before, survivors = counts.split()
    assert int(before) >= 3 and survivors == "0", counts
    alive = [line for line in procs.splitlines() if line.startswith("nobody") and " Z" not in line]
    assert alive == [] and "sleep 400" in procs, procs


def _wheel(directory: Path, version: str, name: str = "ptbdemo") -> Path:
    """A minimal pure-Python wheel of the module `name` (X = version), built by hand."""
    import zipfile

    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"X = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(
            f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
        )
    return path


def test_unprivileged_user_pip_installs_into_its_user_site(
    make_env: MakeEnv, tmp_path: Path
) -> None:
    """The task venv is root's; the agent's `pip install` lands in its user site, which
    wins over the venv's packages for it and is invisible to root."""
    from posttrainbench.host.payload import package_root

    hook = (
        package_root() / "host" / "tasks" / "templates" / "environment" / "ptb" / "ptb_user_site.py"
    )
    old, new, fresh = (
        _wheel(tmp_path, "1.0"),
        _wheel(tmp_path, "2.0"),
        _wheel(tmp_path, "3.0", "ptbfresh"),
    )

    async def body() -> tuple[str, str, str]:
        env = make_env()
        await env.start(force_build=False)
        try:
            site_dir = (
                await env.exec(
                    "python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'"
                )
            ).stdout.strip()
            await env.upload_file(hook, f"{site_dir}/_ptb_user_site.py")
            await env.upload_file(old, f"/wheels/{old.name}")
            await env.upload_file(new, f"/wheels/{new.name}")
            await env.upload_file(fresh, f"/wheels/{fresh.name}")
            # What build.sh does, and start.sh's user; then the venv gets version 1.0, as root.
            setup = await env.exec(
                f"echo 'import _ptb_user_site; _ptb_user_site.enable()' > {site_dir}/_ptb_user_site.pth && "
                "echo 'agent:x:1001:1001::/home/agent:/bin/bash' >> /etc/passwd && mkdir -p /home/agent && "
                "chown 1001:1001 /home/agent && chmod -R a+rX /wheels && "
                f"pip install -q --no-index --no-deps /wheels/{old.name}",
                timeout_sec=120,
            )
            assert setup.return_code == 0, setup.stderr
            # pip itself says to add --ignore-installed to replace a package the venv has.
            agent = await env.exec(
                f"cd /tmp && pip install --no-index --no-deps /wheels/{fresh.name} 2>&1 && "
                f"pip install --no-index --no-deps --ignore-installed /wheels/{new.name} 2>&1; "
                "python -c 'import ptbdemo, ptbfresh; print(ptbdemo.X, ptbdemo.__file__, ptbfresh.X)'",
                user="agent",
                timeout_sec=120,
            )
            root = await env.exec("cd /tmp && python -c 'import ptbdemo; print(ptbdemo.X)'")
            return agent.stdout, agent.stderr, root.stdout
        finally:
            await env.stop(delete=True)

    agent_out, agent_err, root_out = run(body())
    assert "Defaulting to user installation" in agent_out, agent_out + agent_err
    assert "2.0 /home/agent/.local/lib/" in agent_out and agent_out.rstrip().endswith(" 3.0"), (
        agent_out
    )
    assert root_out.strip() == "1.0"


def test_two_instances_with_one_session_id_share_no_cgroup(
    tmp_path: Path, task_env_dir: Path
) -> None:
    """Two trials' instances may carry one session id (two jobs, two test runs at once):
    stopping one must not kill what the other's users run (their cgroups are their own)."""
    from tests.sandbox_support import env_factory

    first_env = env_factory(tmp_path / "one", task_env_dir)()
    second_env = env_factory(tmp_path / "two", task_env_dir)()

    async def body() -> None:
        await first_env.start(force_build=False)
        await second_env.start(force_build=False)
        try:
            for env, marker in ((first_env, "4343.1"), (second_env, "4343.2")):
                await env.exec(f"setsid nohup sleep {marker} > /dev/null 2>&1 &", user="nobody")
            assert len(await _pids_appear("sleep 4343.1", 1)) == 1
            assert len(await _pids_appear("sleep 4343.2", 1)) == 1
            await first_env.stop(delete=True)
            assert _host_pids_matching("sleep 4343.1") == []
            assert len(_host_pids_matching("sleep 4343.2")) == 1
        finally:
            await second_env.stop(delete=True)

    run(body())
