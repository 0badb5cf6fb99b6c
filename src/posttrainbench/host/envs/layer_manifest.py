"""The layers of a task's ``/opt/ptb`` (``environment/ptb/layers.json``), bottom first.

A task compiler that knows which of its files change together writes this manifest; the
local sandbox's cache (:mod:`posttrainbench.host.envs.env_cache`) then builds, keys and shares
each layer on its own and stacks them under every instance's writable layer, the way the
task's Dockerfile layers its image. Each layer is made like a Dockerfile ``COPY`` + ``RUN``:
its inputs are copied to ``/opt/ptb`` (a leading ``ptb/`` dropped), then its build step
runs. Its key is its inputs' content, its ``key`` entries and the sandbox Python, nothing
else: a layer's inputs and ``key`` must name everything its build step reads. The one
exception is a layer that adds packages to the venv (``extends_venv``, e.g. an LLM
judge's client): what it installs depends on the whole venv below, so its key also
holds the venv layer's key.

A task without a manifest (agent tasks, hand-written tasks) is one layer of everything
(:func:`single_layer`), keyed on its whole ``requirements.txt`` and ``ptb/`` tree.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from posttrainbench.core.errors import PtbError
from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.task.schemas import _FileModel

MANIFEST_PATH = "ptb/layers.json"
"""Where the manifest lives, relative to the task's ``environment/`` dir."""


class LayerManifestError(PtbError):
    """A task's layer manifest is malformed or names a file the task does not have."""


class LayerSpec(BaseModel):
    """One layer: what it is made from, and the step that finishes it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$", description="e.g. 'venv', 'model', 'task'")
    inputs: list[str] = Field(
        default_factory=list,
        description=(
            "Files or dirs, relative to environment/, copied into the layer (a leading ptb/ dropped) before "
            "the build step and hashed into its key"
        ),
    )
    build: str | None = Field(
        default=None,
        description=(
            "A bash script among the inputs (relative to environment/), run with PTB_ROOT at the layer"
        ),
    )
    venv: bool = Field(
        default=False,
        description=(
            f"The layer holds {MODEL_LAYOUT.venv}, made from the sandbox Python before the build step; the build "
            "steps of the layers above find its python on PATH"
        ),
    )
    requirements: str | None = Field(
        default=None, description="An input the venv is pip-installed from"
    )
    extends_venv: bool = Field(
        default=False,
        description=(
            "The layer adds packages to the venv below it instead of a venv of its own: its build step "
            "installs them under $PTB_ROOT/venv (stacked over the venv layer's), its key includes the "
            "venv layer's key, and its scripts' paths are rewritten like the venv's"
        ),
    )
    key: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "What else the build step depends on, e.g. the model's source and the pins of the packages it runs"
        ),
    )

    @model_serializer(mode="wrap")
    def _without_unset_extension(self, handler: SerializerFunctionWrapHandler) -> dict:
        # A field added after the first manifests: written only when set, so that every
        # other layers.json (an input of the task layer) and every layer key, which hashes
        # the spec's dump, stay byte for byte what they were before it existed.
        data = handler(self)
        if not self.extends_venv:
            data.pop("extends_venv", None)
        return data

    @field_validator("inputs")
    @classmethod
    def _relative_paths(cls, inputs: list[str]) -> list[str]:
        for rel in inputs:
            if rel.startswith("/") or posixpath.normpath(rel) != rel or rel.split("/")[0] == "..":
                raise ValueError(f"input {rel!r} is not a plain relative path below environment/")
        if len(set(map(destination, inputs))) != len(inputs):
            raise ValueError(f"two inputs land on the same path in {MODEL_LAYOUT.root}")
        return inputs

    @model_validator(mode="after")
    def _steps_are_inputs(self) -> LayerSpec:
        if self.build is not None and not any(_within(self.build, rel) for rel in self.inputs):
            raise ValueError(
                f"layer {self.name!r}: its build step {self.build!r} is not among its inputs"
            )
        if self.requirements is not None and (
            not self.venv or self.requirements not in self.inputs
        ):
            raise ValueError(
                f"layer {self.name!r}: requirements need venv = true and must be one of its inputs"
            )
        if self.extends_venv and self.venv:
            raise ValueError(f"layer {self.name!r}: a venv layer cannot also extend one")
        return self


class LayerManifest(_FileModel):
    """The layers of ``/opt/ptb``, bottom first; a later layer's files win over an earlier one's."""

    layers: list[LayerSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_venv_at_the_bottom(self) -> LayerManifest:
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"layer names repeat: {names}")
        if any(layer.venv for layer in self.layers[1:]):
            raise ValueError(
                "only the first (bottom) layer may hold the venv: the layers above run with it"
            )
        if any(layer.extends_venv for layer in self.layers) and not self.layers[0].venv:
            raise ValueError("a layer extends the venv, but the bottom layer holds none")
        return self


def destination(rel: str) -> str:
    """Where input ``rel`` (relative to environment/) lands below ``/opt/ptb`` ('' = its root)."""
    if rel == "ptb":
        return ""
    return rel.removeprefix("ptb/")


def _within(path: str, rel: str) -> bool:
    return path == rel or path.startswith(rel.rstrip("/") + "/")


def single_layer(environment_dir: Path) -> LayerSpec:
    """The one layer of a task without a manifest: a venv from ``requirements.txt``, the
    whole ``ptb/`` tree and ``ptb/build.sh`` (each only if the task has it)."""
    has = {
        rel: (environment_dir / rel).exists() for rel in ("requirements.txt", "ptb", "ptb/build.sh")
    }
    return LayerSpec(
        name="env",
        inputs=[rel for rel in ("requirements.txt", "ptb") if has[rel]],
        venv=True,
        requirements="requirements.txt" if has["requirements.txt"] else None,
        build="ptb/build.sh" if has["ptb/build.sh"] else None,
    )


def load_layers(environment_dir: Path) -> list[LayerSpec]:
    """The task's layers, bottom first: its manifest's, else :func:`single_layer`.

    Raises :class:`LayerManifestError` for a manifest that does not validate or names an
    input the task does not have.
    """
    path = environment_dir / MANIFEST_PATH
    if not path.is_file():
        return [single_layer(environment_dir)]
    try:
        manifest = LayerManifest.load(path)
    except (ValidationError, ValueError) as exc:
        first = str(exc).splitlines()
        raise LayerManifestError(f"{path}: {' '.join(first[:3])}") from None
    for layer in manifest.layers:
        for rel in layer.inputs:
            if not (environment_dir / rel).exists():
                raise LayerManifestError(
                    f"{path}: layer {layer.name!r} names {rel}, which the task does not have"
                )
    return manifest.layers
