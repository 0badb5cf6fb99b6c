"""The pinned GPU image: the pins file is exact, GPU tasks render it, CPU tasks are untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harbor.agents.factory import AgentFactory
from harbor.models.agent.name import AgentName
from harbor.models.task.config import TaskConfig
from pydantic import ValidationError

from posttrainbench.host.agents.clis import agent_clis
from posttrainbench.host.payload import package_root
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.gpu_image import (
    GpuImagePins,
    agent_cli_version,
    gpu_requirements,
    load_gpu_image_pins,
)
from posttrainbench.host.tasks.options import DEFAULT_CPU_BASE_IMAGE, CompileOptions

PINS_FILE = (
    Path(__file__).resolve().parents[2] / "src/posttrainbench/host/tasks/data/gpu_image.json"
)
EXACT_PIP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==\d+(\.\d+)+([a-z]+\d+)?(\.post\d+)?$")
EXACT_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


@pytest.fixture(scope="module")
def pins() -> GpuImagePins:
    return load_gpu_image_pins()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("tasks")
    return {
        "gpu": compile_task("bfcl", "qwen3-1.7b", out / "gpu", CompileOptions(hours=1)),
        "cpu": compile_task("bfcl", "smollm2-135m", out / "cpu", CompileOptions(hours=1)),
    }


def test_pins_file_is_exact(pins: GpuImagePins) -> None:
    raw = json.loads(PINS_FILE.read_text())
    assert pins.pip == raw["pip"] and pins.npm == raw["npm"]
    for requirement in pins.pip_requirements():
        assert EXACT_PIP.match(requirement), requirement
    assert {
        "torch",
        "vllm",
        "transformers",
        "kernels",
        "accelerate",
        "datasets",
        "peft",
        "trl",
    } <= set(pins.pip)
    for version in (*pins.npm.values(), pins.node_version):
        assert EXACT_SEMVER.match(version), version
    name, _, tag = pins.base_image.rpartition(":")
    assert name and tag != "latest" and re.search(r"\d+\.\d+\.\d+", tag)
    assert pins.python_version == "3.12" and tag.endswith(
        "ubuntu24.04"
    )  # Ubuntu 24.04 ships python3.12
    assert tag.startswith(pins.cuda_version + ".")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pip": {"torch": ">=2.0"}}, "not an exact release"),
        ({"pip": {"torch": "2.*"}}, "not an exact release"),
        ({"pip": {"torch": "2.14.0", "Torch": "2.14.0"}}, "pinned twice"),
        ({"npm": {"@openai/codex": "^0.171.0"}}, "not an exact release"),
        ({"npm": {"@openai/codex": "latest"}}, "not an exact release"),
        ({"node_version": "24"}, "not an exact release"),
        ({"base_image": "nvidia/cuda:latest"}, "exact version tag"),
        ({"base_image": "nvidia/cuda"}, "has no tag"),
        ({"npm": {"@openai/codex": "0.171.0"}}, "without an npm pin"),
    ],
)
def test_inexact_pins_are_rejected(change: dict, message: str) -> None:
    raw = {**json.loads(PINS_FILE.read_text()), **change}
    with pytest.raises(ValidationError, match=re.escape(message)):
        GpuImagePins.model_validate(raw)


def test_gpu_dockerfile_renders_every_pin(tasks: dict[str, Path], pins: GpuImagePins) -> None:
    dockerfile = (tasks["gpu"] / "environment/Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={pins.base_image}\nFROM ${{BASE_IMAGE}}\n" in dockerfile
    assert dockerfile.count("\nFROM ") == 1  # one stage: Modal's builder takes no multi-stage files
    for requirement in pins.pip_requirements():
        assert f"        {requirement}" in dockerfile, requirement
    # Node.js from the npm registry's `node` package; the CLIs from the task's lock file.
    assert f"npm install -g --no-fund --no-audit node@{pins.node_version}" in dockerfile
    assert "COPY agent_clis/ /opt/agent-clis/\nRUN bash /opt/agent-clis/install.sh" in dockerfile
    package = json.loads((tasks["gpu"] / "environment/agent_clis/package.json").read_text())
    assert package["dependencies"] == pins.npm
    assert f"pip=={pins.venv_pip_version}" in dockerfile
    assert "sys.version_info[:2] == (3, 12)" in dockerfile
    # The existing steps still follow: the task requirements, build.sh, the workspace.
    for step in (
        "pip install --no-cache-dir -r /opt/ptb/requirements.txt",
        "ENV PATH=/opt/ptb/venv/bin:${PATH}",
        "RUN bash /opt/ptb/build.sh",
        "COPY workspace/ /app/",
    ):
        assert step in dockerfile
    # Every continued line continues into a command (no dangling `\` before a blank line).
    assert "\\\n\n" not in dockerfile and not re.search(r"[^\\]\n    && ", dockerfile)
    # The partial template is included, not shipped as a file of its own.
    assert not list((tasks["gpu"] / "environment").glob("_*"))


def test_gpu_requirements_put_the_pins_first(tasks: dict[str, Path], pins: GpuImagePins) -> None:
    lines = (tasks["gpu"] / "environment/requirements.txt").read_text().splitlines()
    active = [line for line in lines if line and not line.startswith("#")]
    assert active[: len(pins.pip)] == pins.pip_requirements()
    names = [re.split(r"[=<>!~]", line)[0].lower() for line in active]
    assert len(names) == len(set(names))  # the CPU-tested torch/transformers/numba lines are gone
    assert "tiktoken==0.14.0" in active and "pyarrow==26.0.1" in active  # the rest is kept


def test_gpu_requirements_drop_only_pinned_packages(pins: GpuImagePins) -> None:
    text = "# torch for CPU\ntorch==2.13.0\nHuggingFace_Hub>=1\nLLVMLITE == 0.50.0\nfoo==1.0\n"
    small = GpuImagePins.model_validate(
        {
            **pins.model_dump(),
            "pip": {"torch": "2.14.0", "huggingface-hub": "2.4.0", "llvmlite": "0.47.0"},
        }
    )
    out = gpu_requirements(text, small).splitlines()
    assert [line for line in out if not line.startswith("#")] == [
        "torch==2.14.0",
        "huggingface-hub==2.4.0",
        "llvmlite==0.47.0",
        "foo==1.0",
    ]
    assert "# torch for CPU" in out


def test_cpu_task_is_unaffected(tasks: dict[str, Path]) -> None:
    dockerfile = (tasks["cpu"] / "environment/Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={DEFAULT_CPU_BASE_IMAGE}\n" in dockerfile
    assert "--system-site-packages --without-pip" in dockerfile
    instructions = "\n".join(
        line for line in dockerfile.lower().splitlines() if not line.startswith("#")
    )
    for word in (
        "cuda",
        "npm",
        "node",
        "apt-get",
        "vllm",
    ):  # as words: requirements-nodeps.txt is the CPU task's
        assert not re.search(rf"\b{word}\b", instructions), word
    requirements = (package_root() / "task/evaluation/requirements.txt").read_text()
    assert (tasks["cpu"] / "environment/requirements.txt").read_text() == requirements
    config = TaskConfig.model_validate_toml((tasks["cpu"] / "task.toml").read_text())
    assert config.environment.gpus == 0 and config.environment.gpu_types is None


def test_gpu_task_asks_for_an_h100(tasks: dict[str, Path]) -> None:
    config = TaskConfig.model_validate_toml((tasks["gpu"] / "task.toml").read_text())
    assert config.environment.gpus == 1 and config.environment.gpu_types == ["H100"]


def test_gpu_type_and_base_image_options(tmp_path: Path, pins: GpuImagePins) -> None:
    options = CompileOptions(hours=1, gpu_type="A100-80GB", base_image="ubuntu:24.04")
    task = compile_task("bfcl", "qwen3-1.7b", tmp_path / "gpu", options)
    config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    assert config.environment.gpu_types == ["A100-80GB"]
    dockerfile = (task / "environment/Dockerfile").read_text()
    assert "ARG BASE_IMAGE=ubuntu:24.04\n" in dockerfile and pins.base_image not in dockerfile
    assert f"vllm=={pins.pip['vllm']}" in dockerfile  # the override replaces the base, not the pins
    # A CPU task asks for no GPU type, whatever the option says.
    cpu = compile_task(
        "bfcl", "smollm2-135m", tmp_path / "cpu", CompileOptions(hours=1, gpu_type="H100")
    )
    assert (
        TaskConfig.model_validate_toml((cpu / "task.toml").read_text()).environment.gpu_types
        is None
    )


@pytest.mark.parametrize("gpu_type", ['H100"]', "", "H 100"])
def test_gpu_type_must_be_one_plain_name(gpu_type: str) -> None:
    with pytest.raises(ValidationError):
        CompileOptions(gpu_type=gpu_type)


def test_agent_cli_versions_match_harbor_agents(pins: GpuImagePins) -> None:
    raw = json.loads(PINS_FILE.read_text())
    assert agent_cli_version("claude-code") == raw["npm"]["@anthropic-ai/claude-code"]
    assert agent_cli_version("codex") == raw["npm"]["@openai/codex"]
    assert agent_cli_version("no-such-agent") is None and agent_cli_version("oracle") is None
    assert set(agent_clis()) == {"claude-code", "codex", "gemini-cli", "opencode"}
    for name, cli in agent_clis().items():
        # The name is Harbor's, and Harbor detects the installed version with the same command.
        agent_class = AgentFactory.get_agent_class(AgentName(name))
        assert f"{cli.command} --version" in agent_class.get_version_command(None)  # type: ignore[arg-type]


def test_check_script_views(capsys: pytest.CaptureFixture[str], pins: GpuImagePins) -> None:
    from posttrainbench.host.tasks.gpu_image import main

    assert main(["npm"]) == 0 and capsys.readouterr().out.split() == pins.npm_specs()
    assert main(["platforms"]) == 0
    platforms = capsys.readouterr().out.split()
    assert platforms[0] == "manylinux_2_39_x86_64" and platforms[-1] == "manylinux2014_x86_64"
    assert "manylinux_2_17_x86_64" in platforms
    assert main(["requirements"]) == 0 and "litellm==" in capsys.readouterr().out  # the judge's too
    assert main(["nonsense"]) == 2
