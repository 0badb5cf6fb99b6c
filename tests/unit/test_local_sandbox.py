"""Tests of the bubblewrap local sandbox (real bwrap, no mocks; seconds each)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from harbor.models.task.config import NetworkMode

from posttrainbench.envs.env_cache import (
    EnvironmentBuildError,
    ensure_built,
    resolve_sandbox_python,
)
from tests.unit.conftest_sandbox import (  # noqa: F401  (fixtures)
    MakeEnv,
    make_env,
    run,
    sandbox_cache,
    task_env_dir,
    write_task_env,
)

pytestmark = pytest.mark.skipif(
    subprocess.run(["which", "bwrap"], capture_output=True).returncode != 0,
    reason="bubblewrap is not installed",
)


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
            result = await env.exec("python -c 'import sys, ptbhelper; print(sys.prefix, ptbhelper.VALUE)'")
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
        entry = next(p for p in (sandbox_cache / "envs").iterdir() if len(p.name) == 64)
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
        assert len(_host_pids_matching(f"sleep {marker}")) == 2
        await env.stop(delete=True)
        assert _host_pids_matching(f"sleep {marker}") == []
        assert not env._fs.instance_dir.exists()

    run(body())


def test_uploads_downloads_and_log_mounts(make_env: MakeEnv, tmp_path: Path) -> None:
    async def body() -> None:
        env = make_env()
        await env.start(force_build=False)
        try:
            source = tmp_path / "f.txt"
            source.write_text("data")
            await env.upload_file(source, "/installed-agent/deep/f.txt")
            assert (await env.exec("cat /installed-agent/deep/f.txt")).stdout == "data"
            await env.exec("mkdir -p /app/out && echo r > /app/out/r.txt && echo v > /logs/verifier/reward.txt")
            await env.download_dir("/app/out", tmp_path / "out")
            assert (tmp_path / "out" / "r.txt").read_text() == "r\n"
            # /logs/verifier is the trial's host dir, bound in place.
            assert (env.trial_paths.verifier_dir / "reward.txt").read_text() == "v\n"
            # A symlink planted by the agent must not make the host copy host files.
            await env.exec("ln -s /etc /app/escape")
            with pytest.raises(PermissionError):
                await env.download_dir("/app/escape", tmp_path / "esc")
        finally:
            await env.stop(delete=True)
        assert env.trial_paths.verifier_dir.is_dir()

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
    entry, built = ensure_built(task_env_dir, python)
    assert not built  # the module's earlier tests built it already
    mtime = entry.stat().st_mtime_ns
    entry2, built2 = ensure_built(task_env_dir, python)
    assert (entry2, built2, entry2.stat().st_mtime_ns) == (entry, False, mtime)


def test_failing_build_is_clear_and_leaves_no_entry(tmp_path: Path, sandbox_cache: Path) -> None:
    env_dir = write_task_env(tmp_path / "bad", build_sh="echo converting; exit 7\n")
    (sandbox_cache / "envs").mkdir(exist_ok=True)
    before = set((sandbox_cache / "envs").iterdir())
    with pytest.raises(EnvironmentBuildError, match=r"build\.sh failed.*Build log: ") as info:
        ensure_built(env_dir, resolve_sandbox_python())
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
    from posttrainbench.envs.limits import detect_cgroup_mode

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
