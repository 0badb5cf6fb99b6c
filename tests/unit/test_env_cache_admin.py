"""`ptb cache list|prune` on a real layer cache, with a real sandbox instance holding its layers."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from posttrainbench.host.envs.cache_admin import LayerHolds, list_entries, prune, use_file
from posttrainbench.host.envs.env_cache import (
    SandboxPython,
    ensure_layers,
    plan_layers,
    resolve_sandbox_python,
)
from tests.helpers import run_ptb
from tests.sandbox_support import MakeEnv, requires_bwrap, run
from tests.unit.test_env_layer_sandbox import write_layered_env

pytestmark = [requires_bwrap, pytest.mark.environment]


def test_prune_never_removes_what_a_running_trial_holds(
    make_env: MakeEnv, tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PTB_CACHE_DIR", str(cache))
    running, idle = (
        write_layered_env(tmp_path / "a", hours="1"),
        write_layered_env(tmp_path / "b", hours="2"),
    )
    python = resolve_sandbox_python()
    ensure_layers(
        idle, python
    )  # built, then left unused: its task layer is the only one no trial holds
    held = {layer.entry for layer in plan_layers(running, python)}
    idle_top = plan_layers(idle, python)[-1].entry

    async def body() -> tuple[dict, subprocess.CompletedProcess, subprocess.CompletedProcess, str]:
        env = make_env(env_dir=running)
        await env.start(force_build=False)
        try:
            listed = run_ptb("cache", "list", "--json")
            pruned = run_ptb("cache", "prune", "--max-size", "0")
            still = (
                await env.exec("cat /opt/ptb/task.json; python -c 'print(1)'", user="root")
            ).stdout
            return json.loads(listed.stdout), listed, pruned, still
        finally:
            await env.stop(delete=True)

    listing, listed, pruned, still = run(body())
    assert listed.returncode == 0 and pruned.returncode == 0, listed.stderr + pruned.stderr
    by_path = {row["path"]: row for row in listing}
    trial_dir = str(tmp_path / "trial")
    for entry in held:
        assert by_path[str(entry)]["in_use"] and by_path[str(entry)]["held_by"] == [trial_dir]
    assert not by_path[str(idle_top)]["in_use"] and by_path[str(idle_top)]["size_bytes"] > 0
    assert str(idle_top) in pruned.stdout and "in use" in pruned.stdout
    assert still.splitlines() == ['{"hours": "1"}', "1"]
    assert {
        e.path for e in list_entries(cache / "envs")
    } == held  # only the idle task's own layer went
    # Once the trial has stopped nothing holds them: an age limit removes the stale ones.
    old = time.time() - 3 * 86400
    for entry in held:
        if entry.name.startswith("task-"):
            os.utime(use_file(entry), (old, old))
    removed = prune(cache / "envs", older_than_s=2 * 86400)
    assert [e.layer for e in removed] == ["task"] and not [
        p for p in (cache / "envs").iterdir() if p.name.startswith(".trash-")
    ]


def test_a_size_cap_prunes_after_a_build_and_a_pruned_layer_is_built_again(
    tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posttrainbench.host.envs.env_cache import acquire_layers

    cache = tmp_path / "cache"
    python = resolve_sandbox_python()
    first, second = (
        write_layered_env(tmp_path / "a", hours="1"),
        write_layered_env(tmp_path / "b", hours="2"),
    )
    entries, _built, holds = acquire_layers(first, python, cache)
    holds.release()
    monkeypatch.setenv("PTB_CACHE_MAX_GB", "0.000001")
    entries2, built2, holds2 = acquire_layers(second, python, cache)
    try:
        assert built2 == ["task"]
        # The cap removed the first task's own layer (no one held it), never the held ones.
        assert not entries[2].exists() and all(e.is_dir() for e in entries2)
    finally:
        holds2.release()
    # A layer pruned between its build and its hold is built again.
    assert not LayerHolds([entries[2]]).acquire()
    monkeypatch.delenv("PTB_CACHE_MAX_GB")
    entries3, built3, holds3 = acquire_layers(first, python, cache)
    holds3.release()
    assert built3 == ["task"] and entries3 == entries


def test_cache_cli_mistakes_are_one_line(tmp_path: Path) -> None:
    env = {"PTB_CACHE_DIR": str(tmp_path / "cache")}
    for args, message in [
        (("prune",), "--max-size"),
        (("prune", "--max-size", "-1"), "--max-size"),
    ]:
        result = run_ptb("cache", *args, env=env)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    empty = run_ptb("cache", "list", env=env)
    assert empty.returncode == 0 and "no cache entries" in empty.stdout
    # The README's example, as written there.
    dry = run_ptb("cache", "prune", "--max-size", "20", "--dry-run", env=env)
    assert dry.returncode == 0 and "would remove 0 entries" in dry.stdout, dry.stdout + dry.stderr


def test_what_a_killed_build_left_is_listed_and_pruned_but_a_running_build_is_not(
    tmp_path: Path,
) -> None:
    """Issue 38 item 6: a build killed mid-way leaves its `.build-<name>-*` directory; `ptb
    cache list` shows it, `ptb cache prune` and the next build of that entry remove it,
    and a build still running (its lock held) is left alone."""
    import fcntl

    from posttrainbench.host.envs.cache_admin import orphan_builds, remove_orphan_builds

    envs = tmp_path / "cache" / "envs"
    dead = envs / ".build-venv-abc123-x1y2z3ab"
    running = envs / ".build-model-def456-q9w8e7r6"
    for d in (dead, running):
        (d / "lib").mkdir(parents=True)
        (d / "lib" / "blob").write_bytes(b"\0" * 4096)
    lock = (envs / "model-def456.lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # the other build is still working
    assert orphan_builds(envs) == [dead]
    env = {"PTB_CACHE_DIR": str(tmp_path / "cache")}
    listed = run_ptb("cache", "list", env=env)
    assert (
        "an unfinished build a killed run left" in listed.stdout and dead.name[:20] in listed.stdout
    )
    rows = json.loads(run_ptb("cache", "list", "--json", env=env).stdout)
    assert [r["path"] for r in rows if r["unfinished_build"]] == [str(dead)]
    pruned = run_ptb("cache", "prune", "--older-than", "365", env=env)
    assert pruned.returncode == 0 and f"removed {dead} (an unfinished build)" in pruned.stdout
    assert not dead.exists() and running.is_dir()
    # The next build of an entry clears its own leftovers (it holds that entry's lock).
    fcntl.flock(lock, fcntl.LOCK_UN)
    assert remove_orphan_builds(envs, "venv-abc123") == [] and running.is_dir()
    assert remove_orphan_builds(envs, "model-def456") == [running] and not running.exists()


def test_the_evaluation_environment_is_an_entry_of_the_layer_cache(
    tmp_path: Path, monkeypatch
) -> None:
    """`ptb eval`'s environment is `<cache>/envs/eval-<hash>`: listed, held while used."""
    from posttrainbench.host.envs import eval_env
    from posttrainbench.host.envs.cache_admin import list_entries

    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(eval_env.EVAL_PYTHON_ENV, raising=False)
    monkeypatch.setattr(eval_env, "_host_has_stack", lambda: False)
    built: list[list[str]] = []

    def fake_run(argv, **kw):  # `python -m venv DIR` makes DIR/bin/python; pip does nothing
        built.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            (Path(argv[3]) / "bin").mkdir(parents=True)
            (Path(argv[3]) / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(eval_env.subprocess, "run", fake_run)
    monkeypatch.setattr(
        eval_env,
        "resolve_sandbox_python",
        lambda: SandboxPython(Path("/usr/bin/python3.11"), Path("/usr"), "3.11.2"),
    )
    said: list[str] = []
    python = Path(eval_env.evaluation_python(log=said.append))
    assert said[0].startswith("building the evaluation environment") and "step 4/4" in said[-1]
    entry = python.parents[1]
    assert entry.parent == tmp_path / "cache" / "envs" and entry.name.startswith("eval-")
    (listed,) = list_entries(tmp_path / "cache" / "envs")
    assert listed.layer == "eval" and listed.in_use  # this process holds it
    assert eval_env.evaluation_python(log=lambda _: None) == str(python) and len(built) == 4


def test_the_sandbox_python_is_chosen_the_same_from_any_directory(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 38 item 6: a pyenv shim picks its version by the working directory's
    .python-version and $PYENV_VERSION, so `ptb sweep` run from another directory than `ptb
    run` picked another Python 3.11 and built every layer again. The probe runs from / and
    with PYENV_VERSION=system (the system python3.11 where there is one)."""
    from posttrainbench.host.envs import env_cache

    seen: list[dict] = []
    real_run = subprocess.run

    def spy(argv, **kw):
        seen.append(kw)
        return real_run(argv, **kw)

    (tmp_path / ".python-version").write_text("3.12.1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYENV_VERSION", "3.12.1")
    monkeypatch.delenv("PTB_SANDBOX_PYTHON", raising=False)
    monkeypatch.setattr(env_cache.subprocess, "run", spy)
    here = resolve_sandbox_python()
    assert seen and all(kw["cwd"] == "/" and kw["env"]["PYENV_VERSION"] == "system" for kw in seen)
    monkeypatch.chdir("/")
    monkeypatch.delenv("PYENV_VERSION")
    assert resolve_sandbox_python() == here
