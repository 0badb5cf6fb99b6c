"""Local-sandbox instances nested in one (a Harbor job inside a Harbor task, "Mode B").

An outer instance whose task declares ``nested_sandboxes`` runs this repo's harness as
root (``tests/nested_support.py``, bound read-only with its interpreter): it starts an
inner :class:`~posttrainbench.host.envs.local_sandbox.LocalSandboxEnvironment` in a user
namespace and runs commands there as root and as an unprivileged user. Real bwrap,
nsenter and slirp4netns throughout; each test takes seconds.
"""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

import pytest
from harbor.models.task.config import NetworkMode

from posttrainbench.host.envs.environment_needs import NEEDS_FILE_NAME, EnvironmentNeeds
from posttrainbench.host.envs.host_addresses import HOST_ALLOW_ENV, format_allowance
from tests.nested_support import harness_mounts, inner_command, parse_result
from tests.sandbox_support import MakeEnv, requires_bwrap, run

pytestmark = [requires_bwrap, pytest.mark.slow]

INNER_STEPS: list[tuple[str | int, str]] = [
    (
        "root",
        "id -u; cat /proc/self/uid_map; grep CapEff /proc/self/status; "
        "grep -c : /proc/net/dev; echo written > /tmp/root-file && cat /tmp/root-file; "
        "test -x /opt/ptb/venv/bin/python && echo venv; grep ' /proc ' /proc/self/mounts",
    ),
    (
        "nobody",
        "id -u; ls -d /proc/[0-9]* | wc -l; touch /root/x 2>&1; echo mine > /tmp/n; cat /tmp/n",
    ),
]


def _run_nested(
    make_env: MakeEnv, env_dir: Path, outer: NetworkMode, inner: str, steps: list
) -> list[dict]:
    async def body() -> list[dict]:
        env = make_env(env_dir=env_dir, network=outer, mounts=harness_mounts())
        await env.start(force_build=False)
        try:
            result = await env.exec(inner_command(inner, steps), user="root", timeout_sec=180)
            assert result.return_code == 0, result.stdout + result.stderr
            return parse_result(result.stdout)
        finally:
            await env.stop(delete=True)

    return run(body())


def test_inner_instance_runs_as_root_and_unprivileged_without_network(
    make_env: MakeEnv, nested_env_dir: Path
) -> None:
    root, nobody = _run_nested(
        make_env, nested_env_dir, NetworkMode.NO_NETWORK, "no-network", INNER_STEPS
    )
    assert root["rc"] == 0, root
    lines = root["stdout"].splitlines()
    assert lines[0] == "0"
    # Root is root; every other id is shifted out of the outer instance's users.
    assert [line.split() for line in lines[1:3]] == [["0", "0", "1"], ["1", "100001", "65535"]]
    assert lines[3].split()[1] == "00000000a00405fb"  # the kept capabilities, as outside
    assert lines[4] == "1"  # loopback only
    assert lines[5:7] == ["written", "venv"]
    assert "hidepid=invisible" in lines[7]
    assert nobody["rc"] == 0, nobody
    uid, procs, denied, mine = nobody["stdout"].splitlines()
    assert uid == "65534" and mine == "mine"
    assert int(procs) <= 4, nobody  # its own processes only (hidepid)
    assert "Permission denied" in denied


def _host_address() -> str | None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing address
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_inner_public_network_goes_out_through_both_user_networks(
    make_env: MakeEnv, nested_env_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = _host_address()
    if address is None:
        pytest.skip("this host has no outside address to reach")
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind((address, 0))
    server.listen(8)
    hits: list[str] = []

    def accept() -> None:
        while True:
            try:
                conn, peer = server.accept()
            except OSError:
                return
            hits.append(peer[0])
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    port = server.getsockname()[1]
    # The one port of the host the outer instance may reach (and through it the inner one,
    # whose slirp4netns's sockets are the outer's): every other is blocked.
    monkeypatch.setenv(HOST_ALLOW_ENV, format_allowance(address, port))
    connect = (
        f"python3 -c \"import socket; socket.create_connection(('{address}', {port}), 5).close(); "
        "print('open')\"; ip -4 -o addr show tap0 | wc -l"
    )
    try:
        (result,) = _run_nested(
            make_env, nested_env_dir, NetworkMode.PUBLIC, "public", [("nobody", connect)]
        )
    finally:
        server.close()
    assert result["rc"] == 0 and result["stdout"].split() == ["open", "1"], result
    assert hits, "the host's server saw no connection"


def test_min_python_builds_the_task_venv_on_a_newer_interpreter(
    make_env: MakeEnv, task_env_dir: Path, tmp_path: Path
) -> None:
    shutil.copytree(task_env_dir.parent, tmp_path / "task")
    env_dir = tmp_path / "task" / task_env_dir.name
    EnvironmentNeeds(min_python="3.12").dump(env_dir / NEEDS_FILE_NAME)

    async def body() -> str:
        env = make_env(env_dir=env_dir, network=NetworkMode.NO_NETWORK)
        await env.start(force_build=False)
        try:
            probe = "import sys; print(*sys.version_info[:2])"
            result = await env.exec(f"python -c '{probe}'", user="nobody")
            return result.stdout + result.stderr
        finally:
            await env.stop(delete=True)

    major, minor = run(body()).split()
    assert (int(major), int(minor)) >= (3, 12)


def test_inner_instance_in_an_undeclared_outer_fails_with_one_clear_line(make_env: MakeEnv) -> None:
    async def body() -> str:
        env = make_env(network=NetworkMode.NO_NETWORK, mounts=harness_mounts())
        await env.start(force_build=False)
        try:
            result = await env.exec(inner_command("no-network", [("root", "true")]), user="root")
            assert result.return_code != 0
            return result.stdout + result.stderr
        finally:
            await env.stop(delete=True)

    output = run(body())
    (line,) = [line for line in output.splitlines() if "bwrap failed to start" in line]
    assert (
        "Can't mount proc" in line
        and f"declare nested_sandboxes in environment/{NEEDS_FILE_NAME}" in line
    )
