"""Command-line construction for bwrap/nsenter (no sandbox is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrainbench.host.envs.bwrap import (
    Bind,
    SandboxSpec,
    build_exec_argv,
    build_init_argv,
    gpu_binds,
    lookup_user,
)
from posttrainbench.host.envs.instance_fs import InstanceFs


def test_gpu_binds_from_a_fake_dev_dir(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "null"):
        (dev / name).touch()
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia").mkdir(parents=True)
    binds = gpu_binds(dev, proc)
    assert [b.target for b in binds] == [
        "/dev/nvidia-uvm",
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/proc/driver/nvidia",
    ]
    argv = build_init_argv(SandboxSpec(rootfs=tmp_path, binds=binds))
    assert ["--dev-bind", str(dev / "nvidia0"), "/dev/nvidia0"] == argv[
        argv.index(str(dev / "nvidia0")) - 1 : argv.index(str(dev / "nvidia0")) + 2
    ]
    assert gpu_binds(tmp_path / "missing") == []


def test_init_argv_network_and_bind_order(tmp_path: Path) -> None:
    spec = SandboxSpec(
        rootfs=tmp_path,
        binds=[
            Bind(Path("/host/py"), "/root/.pyenv/versions/3.11.7"),
            Bind(Path("/host/logs"), "/logs/agent", read_only=False),
        ],
    )
    argv = build_init_argv(spec, info_fd=9)
    # Never the host's network namespace (user-mode networking attaches to this one).
    assert "--unshare-net" in argv and "--share-net" not in argv
    # The init's environment is explicit: none of the harness's own variables.
    assert "--clearenv" in argv
    assert argv[argv.index("--bind") : argv.index("--bind") + 3] == ["--bind", str(tmp_path), "/"]
    assert argv.index("/logs/agent") < argv.index("/root/.pyenv/versions/3.11.7")
    assert argv[-5:] == ["--info-fd", "9", "--", "sleep", "infinity"]
    assert "CAP_SYS_ADMIN" not in argv and "CAP_MKNOD" not in argv


def test_exec_argv_user_env_cwd() -> None:
    argv = build_exec_argv(123, "echo hi", cwd="/app", env={"A": "b c"}, uid=1000, gid=1000)
    assert argv[:3] == ["nsenter", "--target", "123"]
    assert ["--reuid", "1000", "--regid", "1000", "--clear-groups"] == argv[
        argv.index("--reuid") : argv.index("--reuid") + 5
    ]
    assert argv[-6:] == ["-C", "/app", "A=b c", "bash", "-c", "echo hi"]
    # A setuid-root program cannot give an unprivileged user euid 0.
    assert "--no-new-privs" in argv
    root = build_exec_argv(123, "true", cwd="/", env={}, network_namespace=False)
    assert "--net" not in root and "--reuid" not in root and "--no-new-privs" not in root


def test_lookup_user(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\nbob:x:1000:1001::/home/bob:/bin/sh\n"
    )
    assert lookup_user(tmp_path, "bob") == (1000, 1001, "/home/bob")
    assert lookup_user(tmp_path, 1000) == (1000, 1001, "/home/bob")
    with pytest.raises(ValueError, match="does not exist"):
        lookup_user(tmp_path, "eve")


def test_sandbox_path_to_trusted_root(tmp_path: Path) -> None:
    logs = tmp_path / "trial" / "agent"
    logs.mkdir(parents=True)
    fs = InstanceFs(tmp_path / "inst", host_mounts={"/logs/agent": logs})
    assert fs.locate("/logs/agent/x.txt") == (logs, "x.txt")
    assert fs.locate("/tests/test.sh") == (fs.rootfs, "tests/test.sh")
    assert fs.locate("/opt/ptb/models") == (fs.ptb_merged, "models")
    assert fs.locate("final_model") == (fs.rootfs, "app/final_model")
    with pytest.raises(PermissionError):
        fs.locate("/usr/bin/python")


def test_stale_mounts_are_the_instances_overlays_below_the_directory(tmp_path):
    from posttrainbench.host.envs.instance_fs import stale_ptb_mounts

    jobs = tmp_path / "my jobs"
    jobs.mkdir()
    esc = str(jobs).replace(" ", "\\040")
    info = tmp_path / "mountinfo"
    info.write_text(
        f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        f"2 1 0:50 / {esc}/t__1/sandbox/a/ptb/merged rw - overlay overlay rw,lowerdir=/x\n"
        f"3 1 0:51 / {esc}/t__2/sandbox/b/ptb/merged rw - tmpfs tmpfs rw\n"
        f"4 1 0:52 / /elsewhere/t__3/sandbox/c/ptb/merged rw - overlay overlay rw\n"
        f"5 1 0:53 / {esc}/t__4/sandbox/d/other rw - overlay overlay rw\n"
    )
    assert stale_ptb_mounts(jobs, info) == [jobs / "t__1" / "sandbox" / "a" / "ptb" / "merged"]
