"""The agent CLIs' pins, lock file and cache entry (posttrainbench.host.envs.agent_clis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.host.envs.agent_clis import (
    TASK_DIR_NAME,
    AgentClisError,
    agent_clis_key,
    ensure_agent_clis,
)
from posttrainbench.host.tasks.gpu_image import agent_clis_package_json, load_gpu_image_pins

TEMPLATE = (
    Path(__file__).resolve().parents[2]
    / "src/posttrainbench/host/tasks/templates/environment/agent_clis"
)


def test_the_lock_file_pins_exactly_the_cli_versions_of_gpu_image_json() -> None:
    lock = json.loads((TEMPLATE / "package-lock.json").read_text())
    pins = load_gpu_image_pins().npm
    assert lock["packages"][""]["dependencies"] == pins
    for package, version in pins.items():
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
    # No download address is recorded (the registry's host stays out of the repository).
    assert "resolved" not in (TEMPLATE / "package-lock.json").read_text()
    assert json.loads(agent_clis_package_json())["dependencies"] == pins


def _task_env(tmp_path: Path, install: str) -> Path:
    env = tmp_path / "task" / "environment"
    clis = env / TASK_DIR_NAME
    clis.mkdir(parents=True)
    (clis / "package.json").write_text(agent_clis_package_json())
    (clis / "package-lock.json").write_text("{}")
    (clis / "install.sh").write_text(install)
    return env


FAKE_INSTALL = (
    'mkdir -p node_modules/.bin && printf "#!/bin/sh\\necho 1.0\\n" > node_modules/.bin/fake\n'
)


def test_the_clis_are_installed_once_per_key(tmp_path: Path) -> None:
    env = _task_env(tmp_path, FAKE_INSTALL)
    entry, installed = ensure_agent_clis(env, tmp_path / "envs")
    assert installed and (entry / "node_modules/.bin/fake").is_file()
    assert entry.stat().st_mode & 0o755 == 0o755  # the agent's user reads and runs them
    assert ensure_agent_clis(env, tmp_path / "envs") == (entry, False)
    (env / TASK_DIR_NAME / "package-lock.json").write_text('{"changed": true}')
    assert agent_clis_key(env) not in entry.name


def test_a_failed_install_leaves_no_entry_and_names_its_log(tmp_path: Path) -> None:
    env = _task_env(tmp_path, "echo 'npm error E404 no such package' >&2\nexit 3\n")
    with pytest.raises(AgentClisError, match="E404 no such package; install log: ") as info:
        ensure_agent_clis(env, tmp_path / "envs")
    log = Path(str(info.value).rsplit("install log: ", 1)[1])
    assert "E404" in log.read_text()
    assert not [
        p for p in (tmp_path / "envs").iterdir() if p.name.startswith("agent_clis-") and p.is_dir()
    ]


def test_a_task_without_cli_pins_is_one_clear_error(tmp_path: Path) -> None:
    env = tmp_path / "old-task" / "environment"
    env.mkdir(parents=True)
    with pytest.raises(AgentClisError, match="recompile it"):
        ensure_agent_clis(env, tmp_path / "envs")


def test_a_run_installs_the_clis_before_its_job_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from posttrainbench.core.errors import RunError
    from posttrainbench.host.runner.prebuild import prebuild_agent_clis

    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    env = _task_env(tmp_path, FAKE_INSTALL)
    console = Console(record=True, width=200)
    first = prebuild_agent_clis(env.parent, console)
    assert prebuild_agent_clis(env.parent, console) == first
    said = console.export_text()
    assert "installing the agent CLIs (first run only" in said
    assert (
        f"agent CLIs: installed ({first.name})" in said
        and f"agent CLIs: cached ({first.name})" in said
    )
    broken = _task_env(tmp_path / "other", "echo 'npm error ENOTFOUND' >&2\nexit 1\n")
    with pytest.raises(RunError, match="ENOTFOUND; install log: ") as info:
        prebuild_agent_clis(broken.parent, console)
    assert "\n" not in str(info.value)
