"""The pinned software of GPU task images, read from ``host/tasks/data/gpu_image.json``.

One data file holds every version a GPU task's Dockerfile installs: the CUDA base image,
the Python it ships, the pip packages (torch, vLLM, transformers, kernels, training
libraries) and Node.js with the agent CLIs. The compiler renders them into the task;
``agent_cli_version`` gives the CLI version to pass to Harbor's installed agents, which
then find that CLI already in the image and skip their own install. docs/gpu-image.md says how to bump.

``python -m posttrainbench.host.tasks.gpu_image {requirements,pip,npm,platforms,python}`` prints
what ``scripts/check_gpu_pins.sh`` checks against the package registries.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from posttrainbench.host.agents.clis import agent_clis

PINS_RESOURCE = ("data", "gpu_image.json")
# Oldest glibc of the manylinux tags a pip check accepts (manylinux2014 is glibc 2.17).
OLDEST_MANYLINUX_GLIBC = 17
# A concrete release: no operators, wildcards or ranges (PEP 440 public + local parts).
_EXACT_PIP_VERSION = re.compile(
    r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?$"
)
_EXACT_SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
_PIP_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical_name(name: str) -> str:
    """A pip project name normalised as package indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _exact_image_tag(image: str) -> str:
    """Reject an image reference without an exact version tag (or digest)."""
    if "@sha256:" in image:
        return image
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag or not name:
        raise ValueError(f"base image {image!r} has no tag")
    if tag == "latest" or not re.search(r"\d+\.\d+", tag):
        raise ValueError(f"base image {image!r} must have an exact version tag, not {tag!r}")
    return image


class GpuImagePins(BaseModel):
    """Every version the GPU task image installs; all exact, so two builds agree."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_image: str = Field(
        description="Public CUDA image, exactly tagged; Modal and Daytona pull it"
    )
    cuda_version: str = Field(
        pattern=r"^\d+\.\d+$", description="CUDA of the base image (and of torch's wheels)"
    )
    python_version: str = Field(pattern=r"^3\.\d+$", description="The base image's system python3")
    glibc_version: str = Field(
        pattern=r"^2\.\d+$", description="The base image's glibc (manylinux check)"
    )
    arch: Literal["x86_64"] = "x86_64"
    venv_pip_version: str = Field(description="pip in the task venv (the distribution's is older)")
    pip: dict[str, str] = Field(min_length=1, description="pip project -> exact version")
    node_version: str = Field(description="Node.js release the agent CLIs run on")
    npm: dict[str, str] = Field(
        min_length=1, description="npm package -> exact version (installed -g)"
    )

    @field_validator("base_image")
    @classmethod
    def _exact_base_image(cls, image: str) -> str:
        return _exact_image_tag(image)

    @field_validator("pip")
    @classmethod
    def _exact_pip(cls, pins: dict[str, str]) -> dict[str, str]:
        for name, version in pins.items():
            if not _PIP_NAME.match(name) or not _EXACT_PIP_VERSION.match(version):
                raise ValueError(f"pip pin {name}=={version} is not an exact release")
        names = [canonical_name(n) for n in pins]
        if len(set(names)) != len(names):
            raise ValueError("a pip project is pinned twice")
        return pins

    @field_validator("venv_pip_version")
    @classmethod
    def _exact_venv_pip(cls, version: str) -> str:
        if not _EXACT_PIP_VERSION.match(version):
            raise ValueError(f"pip version {version!r} is not an exact release")
        return version

    @field_validator("node_version")
    @classmethod
    def _exact_node(cls, version: str) -> str:
        if not _EXACT_SEMVER.match(version):
            raise ValueError(f"node version {version!r} is not an exact release")
        return version

    @field_validator("npm")
    @classmethod
    def _exact_npm(cls, pins: dict[str, str]) -> dict[str, str]:
        for name, version in pins.items():
            if not _NPM_NAME.match(name) or not _EXACT_SEMVER.match(version):
                raise ValueError(f"npm pin {name}@{version} is not an exact release")
        return pins

    @model_validator(mode="after")
    def _agents_are_pinned(self) -> GpuImagePins:
        missing = sorted({cli.package for cli in agent_clis().values()} - set(self.npm))
        if missing:
            raise ValueError(f"agent CLI packages without an npm pin: {', '.join(missing)}")
        return self

    def pip_requirements(self) -> list[str]:
        """The pip pins as requirement lines (``name==version``)."""
        return [f"{name}=={version}" for name, version in self.pip.items()]

    def npm_specs(self) -> list[str]:
        """The npm pins as install specs (``package@version``)."""
        return [f"{name}@{version}" for name, version in self.npm.items()]

    def manylinux_platforms(self) -> list[str]:
        """pip ``--platform`` tags the base image accepts, newest first (pip does not expand them)."""
        newest = int(self.glibc_version.split(".")[1])
        tags = [
            f"manylinux_2_{minor}_{self.arch}"
            for minor in range(newest, OLDEST_MANYLINUX_GLIBC - 1, -1)
        ]
        return [*tags, f"manylinux2014_{self.arch}"]


@functools.cache
def load_gpu_image_pins() -> GpuImagePins:
    """The GPU image pins shipped with the package (validated once, then cached)."""
    source = resources.files("posttrainbench.host.tasks").joinpath(*PINS_RESOURCE)
    return GpuImagePins.model_validate_json(source.read_text())


def agent_cli_version(agent_name: str) -> str | None:
    """The CLI version the GPU image ships for a Harbor agent name; None if it ships none."""
    cli = agent_clis().get(agent_name)
    return load_gpu_image_pins().npm[cli.package] if cli else None


def gpu_requirements(task_requirements: str, pins: GpuImagePins | None = None) -> str:
    """A GPU task's requirements.txt: the image's pip pins, then the task's own lines
    for every package the pins do not name.

    The pins win where both name a package: vLLM pins torch (and numba) exactly, and
    the CPU-tested task requirements may name other releases of them.
    """
    pins = pins or load_gpu_image_pins()
    pinned = {canonical_name(name) for name in pins.pip}
    kept = []
    for line in task_requirements.splitlines():
        match = _REQUIREMENT_NAME.match(line)
        if match and not line.lstrip().startswith("#") and canonical_name(match.group(1)) in pinned:
            continue
        kept.append(line)
    header = [
        "# The GPU image's pins (posttrainbench/host/tasks/data/gpu_image.json); they win over",
        "# the task requirements below, which no longer name these packages.",
    ]
    return "\n".join([*header, *pins.pip_requirements(), *kept]) + "\n"


def agent_clis_package_json(pins: GpuImagePins | None = None) -> str:
    """The ``package.json`` of the pinned agent CLIs (a task's ``agent_clis/``, the CPU base
    image); ``agent_clis/package-lock.json`` beside it pins everything they depend on."""
    pins = pins or load_gpu_image_pins()
    package = {
        "name": "ptb-agent-clis",
        "private": True,
        "description": "The agent CLIs at the versions pinned in posttrainbench/host/tasks/data/gpu_image.json",
        "dependencies": pins.npm,
    }
    return json.dumps(package, indent=2) + "\n"


def main(argv: list[str]) -> int:
    """Print one view of the pins, one item a line, for scripts/check_gpu_pins.sh."""
    pins = load_gpu_image_pins()
    what = argv[0] if argv else ""
    if what == "requirements":  # what a GPU task with an LLM judge installs
        evaluation = resources.files("posttrainbench.task.evaluation")
        text = "".join(
            evaluation.joinpath(name).read_text()
            for name in ("requirements.txt", "requirements-judge.txt")
        )
        print(gpu_requirements(text, pins), end="")
    elif what == "pip":  # the venv's own pip
        print(f"pip=={pins.venv_pip_version}")
    elif what == "npm":
        print("\n".join(pins.npm_specs()))
    elif what == "node":  # the CPU base image's Node.js
        print(pins.node_version)
    elif what == "package-json":  # the CPU base image's agent CLIs
        print(agent_clis_package_json(pins), end="")
    elif what == "platforms":
        print("\n".join(pins.manylinux_platforms()))
    elif what == "python":
        print(pins.python_version)
    else:
        print(
            "usage: python -m posttrainbench.host.tasks.gpu_image "
            "{requirements,pip,npm,node,package-json,platforms,python}",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
