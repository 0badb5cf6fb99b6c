"""The layered environment cache on real builds and real bubblewrap sandboxes (seconds each).

Tiny three-layer tasks (a venv with no requirements, a "model" layer whose build step runs
the venv's python, the task's own files) stand in for the model tasks' venv/model/task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrainbench.host.envs import instance_fs
from posttrainbench.host.envs.env_cache import (
    EnvironmentBuildError,
    ensure_layers,
    plan_layers,
    resolve_sandbox_python,
)
from posttrainbench.host.envs.layer_manifest import MANIFEST_PATH
from tests.sandbox_support import MakeEnv, requires_bwrap, run, write_task_env

pytestmark = [requires_bwrap, pytest.mark.environment]

# The "model" layer's step runs the venv's python (first on PATH), as build_model.sh does;
# $PTB_TEST_COUNTER (a host file) counts how often each layer was built.
VENV_STEP = 'echo venv >> "$PTB_TEST_COUNTER"; echo lower > "$PTB_ROOT/shadow.txt"\n'
MODEL_STEP = (
    'echo model >> "$PTB_TEST_COUNTER"; sleep "${PTB_TEST_MODEL_SLEEP:-0}"\n'
    'mkdir -p "$PTB_ROOT/models/base"\n'
    'python -c "import sys, json; print(json.dumps({\'prefix\': sys.prefix}))" > "$PTB_ROOT/models/base/config.json"\n'
    'echo model > "$PTB_ROOT/shadow.txt"; chmod 0666 "$PTB_ROOT/shadow.txt"\n'
)
TASK_STEP = 'echo task >> "$PTB_TEST_COUNTER"\n'


def write_layered_env(root: Path, hours: str = "1", model_step: str = MODEL_STEP) -> Path:
    """A task environment with a three-layer manifest; ``hours`` is in the top layer only."""
    env_dir = write_task_env(root)
    ptb = env_dir / "ptb"
    (ptb / "build_venv.sh").write_text(VENV_STEP)
    (ptb / "build_model.sh").write_text(model_step)
    (ptb / "build.sh").write_text(TASK_STEP)
    (ptb / "task.json").write_text(json.dumps({"hours": hours}) + "\n")
    (ptb / "shadow.txt").write_text("top\n")
    manifest = {
        "layers": [
            {
                "name": "venv",
                "inputs": ["requirements.txt", "ptb/build_venv.sh"],
                "venv": True,
                "requirements": "requirements.txt",
                "build": "ptb/build_venv.sh",
            },
            {
                "name": "model",
                "inputs": ["ptb/build_model.sh"],
                "build": "ptb/build_model.sh",
                "key": {"model": "tiny"},
            },
            {"name": "task", "inputs": ["ptb"], "build": "ptb/build.sh"},
        ]
    }
    (env_dir / MANIFEST_PATH).write_text(json.dumps(manifest))
    return env_dir


def test_layers_stack_in_a_sandbox_and_a_second_task_builds_only_its_top(
    make_env: MakeEnv, tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    first, second = (
        write_layered_env(tmp_path / "a", hours="1"),
        write_layered_env(tmp_path / "b", hours="2"),
    )
    python = resolve_sandbox_python()
    entries, built = ensure_layers(first, python)
    assert built == ["venv", "model", "task"]
    entries2, built2 = ensure_layers(second, python)
    assert built2 == ["task"] and entries2[:2] == entries[:2] and entries2[2] != entries[2]
    assert counter.read_text().split() == ["venv", "model", "task", "task"]
    # The model layer's step ran the venv's python, at its place in the cache.
    model_config = json.loads((entries[1] / "models/base/config.json").read_text())
    assert model_config["prefix"] == str(entries[0] / "venv")

    async def body() -> dict[str, str]:
        env = make_env(env_dir=second)
        await env.start(force_build=False)
        try:
            out = {}
            for name, command, user in [
                ("mode", "true", None),
                (
                    "layers",
                    "cat /opt/ptb/shadow.txt /opt/ptb/task.json; python -c 'import sys; print(sys.prefix)'; "
                    "test -s /opt/ptb/models/base/config.json && echo model-ok",
                    "root",
                ),
                # The agent's user writes nothing of /opt/ptb, whichever layer a file comes from.
                (
                    "agent",
                    "echo x > /opt/ptb/shadow.txt; echo x > /opt/ptb/models/base/config.json; "
                    "touch /opt/ptb/venv/new; echo rc=$?",
                    "nobody",
                ),
                (
                    "root",
                    "echo root-edit > /opt/ptb/shadow.txt && rm /opt/ptb/models/base/config.json && echo ok",
                    "root",
                ),
            ]:
                result = await env.exec(command, user=user)
                out[name] = result.stdout + result.stderr
            out["mode"] = env._fs.ptb_mode
            return out
        finally:
            await env.stop(delete=True)

    out = run(body())
    assert out["mode"] == "overlay"
    assert out["layers"].splitlines() == ["top", '{"hours": "2"}', "/opt/ptb/venv", "model-ok"]
    assert out["agent"].count("Permission denied") == 3 and "rc=1" in out["agent"], out["agent"]
    assert out["root"].strip() == "ok"
    # Root's edits went to the instance's own layer: no cache entry changed.
    assert (entries[1] / "models/base/config.json").is_file()
    assert (entries2[2] / "shadow.txt").read_text() == "top\n" and (
        entries[1] / "shadow.txt"
    ).read_text() == "model\n"
    # A build step's mode (0666 above) never makes a layer writable to others.
    assert not [
        p for e in entries2 for p in e.rglob("*") if not p.is_symlink() and p.stat().st_mode & 0o022
    ]


def test_without_overlayfs_the_layers_are_copied_bottom_up(
    make_env: MakeEnv, tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    env_dir = write_layered_env(tmp_path / "a")

    def no_overlay(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        if argv[0] == "mount":
            return subprocess.CompletedProcess(argv, 32, "", "overlay: unsupported (test)")
        return subprocess.run(argv, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(instance_fs, "subprocess", SimpleNamespace(run=no_overlay))

    async def body() -> tuple[str, str]:
        env = make_env(env_dir=env_dir)
        await env.start(force_build=False)
        try:
            result = await env.exec(
                "cat /opt/ptb/shadow.txt; python -c 'import sys; print(sys.prefix)'; "
                "test -s /opt/ptb/models/base/config.json && echo model-ok; "
                "echo edit > /opt/ptb/shadow.txt",
                user="root",
            )
            return env._fs.ptb_mode, result.stdout
        finally:
            await env.stop(delete=True)

    mode, stdout = run(body())
    assert mode == "copy" and stdout.splitlines() == ["top", "/opt/ptb/venv", "model-ok"]
    (top,) = [
        layer
        for layer in plan_layers(env_dir, resolve_sandbox_python())
        if layer.spec.name == "task"
    ]
    assert (top.entry / "shadow.txt").read_text() == "top\n"  # the copy was the instance's own


_CONCURRENT_BUILD = """
import json, sys
from pathlib import Path
from posttrainbench.host.envs.env_cache import ensure_layers, resolve_sandbox_python
entries, built = ensure_layers(Path(sys.argv[1]), resolve_sandbox_python())
print(json.dumps({"entries": [str(e) for e in entries], "built": built}))
"""


def test_concurrent_builders_of_a_layer_build_it_once(tmp_path: Path, counter: Path) -> None:
    """Two trials of two tasks that share their venv and model layers start at once."""
    envs = [
        write_layered_env(tmp_path / "a", hours="1"),
        write_layered_env(tmp_path / "b", hours="2"),
    ]
    env = {**os.environ, "PTB_TEST_MODEL_SLEEP": "2", "PTB_CACHE_DIR": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT_BUILD, str(e)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for e in envs
    ]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        results.append(json.loads(stdout))
    assert sorted(counter.read_text().split()) == ["model", "task", "task", "venv"]
    assert results[0]["entries"][:2] == results[1]["entries"][:2]
    assert sorted(results[0]["built"] + results[1]["built"]) == ["model", "task", "task", "venv"]
    leftovers = [
        p.name for p in (tmp_path / "cache" / "envs").iterdir() if p.name.startswith(".build-")
    ]
    assert not leftovers


def test_a_failed_layer_leaves_no_entry_and_names_its_log(tmp_path: Path, counter: Path) -> None:
    env_dir = write_layered_env(tmp_path / "a", model_step="echo converting the model; exit 3\n")
    root = tmp_path / "cache"
    with pytest.raises(
        EnvironmentBuildError, match=r"layer 'model'.*build_model\.sh failed.*Build log: "
    ) as info:
        ensure_layers(env_dir, resolve_sandbox_python(), root)
    log = Path(str(info.value).split("Build log: ")[1])
    assert "converting the model" in log.read_text()
    venv, model, task = plan_layers(env_dir, resolve_sandbox_python(), root)
    assert venv.built and not model.built and not task.built  # the complete lower layer is kept
    assert not [p for p in (root / "envs").iterdir() if p.name.startswith(".build-")]
