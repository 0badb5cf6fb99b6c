"""The set-up and test scripts: `--help` prints their header and installs nothing, and
apt-get is safe to interrupt (an interrupted dpkg is finished before the next install)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    p.relative_to(REPO).as_posix()
    for p in [*REPO.glob("scripts/*.sh"), *REPO.glob("scripts/docker/*.sh")]
)
# Every command a script could install or build with: each shim records its call.
RECORDED = ("apt-get", "dpkg", "sudo", "uv", "pip", "docker", "dockerd", "python3", "make")


def _shims(tmp_path: Path, dpkg_audit: str = "") -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    for name in RECORDED:
        shim = bin_dir / name
        body = f'echo "{name} $*" >> {calls}\n'
        if name == "dpkg":
            body += f'[ "$1" = --audit ] && printf %s {dpkg_audit!r}\n'
        if name == "sudo":  # runs the command itself (a shim again), as root would
            body += 'exec "$@"\n'
        shim.write_text("#!/bin/sh\n" + body + "exit 0\n")
        shim.chmod(0o755)
    return bin_dir, calls


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_the_header_and_runs_nothing(script, tmp_path):
    bin_dir, calls = _shims(tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for flag in ("--help", "-h"):
        done = subprocess.run(
            ["bash", script, flag], cwd=REPO, env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        header = (REPO / script).read_text().splitlines()[1].lstrip("# ").strip()
        assert done.stdout.splitlines()[0].strip() == header
        assert "#" not in done.stdout.splitlines()[0]
    assert not calls.exists(), calls.read_text()


def _apt_install(tmp_path: Path, audit: str) -> list[str]:
    bin_dir, calls = _shims(tmp_path, dpkg_audit=audit)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(
        ["bash", "-c", "source scripts/lib/apt.sh && apt_install bubblewrap"],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        timeout=30,
    )
    # Not as root, each command also goes through the sudo shim: keep the commands.
    return [c for c in calls.read_text().splitlines() if not c.startswith("sudo ")]


def test_an_interrupted_dpkg_is_finished_before_the_next_install(tmp_path):
    calls = _apt_install(tmp_path, audit="The following packages are only half configured")
    configure = next(i for i, c in enumerate(calls) if c.startswith("dpkg --configure -a"))
    install = next(i for i, c in enumerate(calls) if c.startswith("apt-get") and "install" in c)
    assert configure < install
    assert "DPkg::Lock::Timeout" in calls[install]


def test_a_clean_dpkg_is_left_alone(tmp_path):
    calls = _apt_install(tmp_path, audit="")
    assert not any(c.startswith("dpkg --configure") for c in calls)
    assert any(c.startswith("apt-get") and "install" in c and "bubblewrap" in c for c in calls)
