"""A task's ptb-environment.json, and how a nested instance's command lines differ (no sandbox
is started)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.core.errors import PtbError
from posttrainbench.host.envs import user_net
from posttrainbench.host.envs.bwrap import (
    NESTED_ID_MAP,
    NESTED_PROC_MOUNT,
    Bind,
    SandboxSpec,
    build_exec_argv,
    build_hidepid_argv,
    build_init_argv,
    build_nested_proc_argv,
    has_cap_sys_admin,
    tun_binds,
    write_nested_id_maps,
)
from posttrainbench.host.envs.env_cache import EnvironmentBuildError, resolve_sandbox_python
from posttrainbench.host.envs.environment_needs import (
    NEEDS_FILE_NAME,
    EnvironmentNeeds,
    EnvironmentNeedsError,
    load_environment_needs,
)
from posttrainbench.host.envs.user_net import UserNetworkError, build_slirp_argv, check_available

# ------------------------------------------------------------------ the needs file


def test_absent_needs_file_means_the_defaults(tmp_path: Path) -> None:
    needs = load_environment_needs(tmp_path)
    assert needs == EnvironmentNeeds()
    assert not needs.nested_sandboxes and needs.min_python is None
    assert needs.min_python_version is None


def test_needs_file_is_read(tmp_path: Path) -> None:
    EnvironmentNeeds(nested_sandboxes=True, min_python="3.12").dump(tmp_path / NEEDS_FILE_NAME)
    needs = load_environment_needs(tmp_path)
    assert needs.nested_sandboxes and needs.min_python_version == (3, 12)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"nested_sandboxes": "sometimes"}',
        '{"min_python": "3"}',
        '{"min_python": "python3.12"}',
        '{"nested": true}',  # a misspelt field is an error, not silently the default
        "[]",
    ],
)
def test_malformed_needs_file_is_one_clear_error(tmp_path: Path, text: str) -> None:
    (tmp_path / NEEDS_FILE_NAME).write_text(text)
    with pytest.raises(EnvironmentNeedsError) as caught:
        load_environment_needs(tmp_path)
    message = str(caught.value)
    assert isinstance(caught.value, PtbError)
    assert message.startswith(str(tmp_path / NEEDS_FILE_NAME)) and "\n" not in message


# ------------------------------------------------------------------ command lines


def test_nested_init_argv_adds_only_the_user_namespace(tmp_path: Path) -> None:
    spec = SandboxSpec(rootfs=tmp_path, binds=[Bind(Path("/host/py"), "/py")])
    plain = build_init_argv(spec, info_fd=9)
    assert "--unshare-user" not in plain and "--userns-block-fd" not in plain
    nested_spec = SandboxSpec(rootfs=tmp_path, binds=spec.binds, user_namespace=True)
    nested = build_init_argv(nested_spec, info_fd=9, userns_block_fd=7)
    assert nested[1:4] == ["--unshare-user", "--userns-block-fd", "7"]
    assert [nested[0], *nested[4:]] == plain
    with pytest.raises(ValueError, match="userns_block_fd"):
        build_init_argv(nested_spec, info_fd=9)


def test_nested_nsenters_join_the_user_namespace_first() -> None:
    plain = build_exec_argv(42, "id", cwd="/app", env={}, uid=1000, gid=1000)
    nested = build_exec_argv(42, "id", cwd="/app", env={}, uid=1000, gid=1000, user_namespace=True)
    assert nested == [*plain[:3], "--user", *plain[3:]]
    assert build_hidepid_argv(42) == [
        "nsenter",
        "--target",
        "42",
        "--mount",
        "--root",
        "--",
        "mount",
        "-o",
        "remount,nosuid,nodev,noexec,hidepid=invisible,gid=0",
        "/proc",
    ]
    assert build_hidepid_argv(42, user_namespace=True) == [
        *build_hidepid_argv(42)[:3],
        "--user",
        *build_hidepid_argv(42)[3:],
    ]
    proc = build_nested_proc_argv(42)
    assert proc[:6] == ["nsenter", "--target", "42", "--mount", "--pid", "--root"]
    assert proc[-1] == NESTED_PROC_MOUNT and "proc" in proc
    # No /proc/sys in the extra mount: uid 0 inside could write host sysctls through it.
    assert "subset=pid" in proc[proc.index("-o") + 1].split(",")
    assert build_nested_proc_argv(42, user_namespace=True)[3] == "--user"
    slirp = build_slirp_argv(42, 5, 6)
    assert slirp[0] == "slirp4netns" and slirp[-2:] == ["42", "tap0"]
    assert build_slirp_argv(42, 5, 6, user_namespace=True) == [
        *["nsenter", "--target", "42", "--user", "--"],
        *slirp,
    ]


def test_cap_sys_admin_from_cap_eff(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t000001fffeffffff\n")
    assert has_cap_sys_admin(status)
    # What root inside an instance holds (KEPT_CAPABILITIES).
    status.write_text("Name:\tx\nCapEff:\t00000000a00405fb\n")
    assert not has_cap_sys_admin(status)
    assert isinstance(has_cap_sys_admin(), bool)


def test_identity_maps_and_tun_bind(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    write_nested_id_maps(77, proc_root=tmp_path)
    assert (tmp_path / "77" / "uid_map").read_text() == NESTED_ID_MAP == "0 0 1\n1 100001 65535\n"
    assert (tmp_path / "77" / "gid_map").read_text() == NESTED_ID_MAP
    assert tun_binds(tmp_path) == []
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tun").touch()
    assert tun_binds(tmp_path) == [
        Bind(tmp_path / "net" / "tun", "/dev/net/tun", read_only=False, device=True)
    ]


def test_nested_network_without_tun_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("slirp4netns") is None:
        pytest.skip("slirp4netns is not installed")
    monkeypatch.setattr(user_net, "TUN_DEVICE", tmp_path / "tun")
    check_available()  # a harness on the host does not need it
    with pytest.raises(UserNetworkError) as caught:
        check_available(nested=True)
    assert "nested_sandboxes" in str(caught.value) and "\n" not in str(caught.value)


# ------------------------------------------------------------------ min_python


def _version(executable: Path) -> tuple[int, int]:
    out = subprocess.run(
        [str(executable), "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]), int(out[1])


def test_min_python_skips_an_older_explicit_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    older = shutil.which("python3.11")
    if older is None:
        pytest.skip("no python3.11 on PATH")
    monkeypatch.setenv("PTB_SANDBOX_PYTHON", older)
    assert _version(resolve_sandbox_python().executable) == (3, 11)  # honoured without a minimum
    chosen = resolve_sandbox_python((3, 12))
    assert _version(chosen.executable) >= (3, 12)
    assert (chosen.prefix / "bin").is_dir() and chosen.version.startswith("3.")


def test_min_python_takes_a_qualifying_explicit_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    harness = os.path.realpath(sys._base_executable)  # type: ignore[attr-defined]
    monkeypatch.setenv("PTB_SANDBOX_PYTHON", harness)
    assert str(resolve_sandbox_python((3, 12)).executable) == harness


def test_unsatisfiable_min_python_is_a_build_error() -> None:
    with pytest.raises(EnvironmentBuildError, match=r"needs a sandbox Python >= 3\.99"):
        resolve_sandbox_python((3, 99))


def test_task_python_follows_the_needs_file(tmp_path: Path) -> None:
    from posttrainbench.host.envs.env_cache import resolve_task_python

    EnvironmentNeeds(min_python="3.12").dump(tmp_path / NEEDS_FILE_NAME)
    assert _version(resolve_task_python(tmp_path).executable) >= (3, 12)
    EnvironmentNeeds(min_python="3.99").dump(tmp_path / NEEDS_FILE_NAME)
    with pytest.raises(EnvironmentBuildError, match=r">= 3\.99"):
        resolve_task_python(tmp_path)


def test_the_ptrace_guard_refuses_ptrace_and_memory_access_and_keeps_the_rest() -> None:
    """What a nested instance's commands run under (envs.ptrace_guard): an attach to another
    process, and reading its memory, fail with EPERM; everything else works."""
    import subprocess
    import sys

    from posttrainbench.host.envs.ptrace_guard import guarded_argv

    # The target is the probe's own child: an attach that works is undone at once.
    probe = (
        "import ctypes, os, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "child = subprocess.Popen(['sleep', '30'])\n"
        "attach = libc.ptrace(16, child.pid, 0, 0)\n"  # PTRACE_ATTACH
        "attach_errno = ctypes.get_errno()\n"
        "if attach == 0:\n"
        "    os.waitpid(child.pid, 0)\n"
        "    libc.ptrace(17, child.pid, 0, 0)\n"  # PTRACE_DETACH
        "buf = ctypes.create_string_buffer(8)\n"
        "iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)\n"
        "read = libc.process_vm_readv(child.pid, iov, 1, iov, 1, 0)\n"
        "read_errno = ctypes.get_errno()\n"
        "child.kill()\n"
        "print(attach, attach_errno, read, read_errno)\n"
        "print(open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])\n"
    )
    done = subprocess.run(
        guarded_argv([sys.executable, "-c", probe]), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-1", "1", "-1", "1", "1"], done.stdout
    # Without the guard the same probe attaches: the guard is the reason it cannot.
    bare = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert bare.stdout.split()[0] == "0", bare.stdout
