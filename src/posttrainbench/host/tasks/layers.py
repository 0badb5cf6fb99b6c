"""The layers of a model task's ``/opt/ptb`` (``environment/ptb/layers.json``) and the
Dockerfile steps that make the same layers in the image.

Bottom to top:

- ``venv``: the task's requirements (+ the ``--no-deps`` ones and the agent's user-site
  hook); shared by every task with the same requirements;
- ``model``: the base model, made from its source by the conversion code, run with the
  pins of the packages the conversion imports; shared by every benchmark and budget on
  that model and stack;
- ``judge`` (LLM-judged benchmarks only): the judge's client (``requirements-judge.txt``)
  added to the venv below, only what it lacks (about 0.3 GB, not a second 1.6 GB venv);
  keyed by the venv's key and those requirements, so shared by every judged task on it;
- ``task``: the task's own files (``task.json``, data, scripts, ``lib/``; a few MB), the
  only layer that a change of hours, benchmark or options rebuilds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.envs.layer_manifest import LayerManifest, LayerSpec, destination
from posttrainbench.task.evaluation.prepare_model import CONVERSION_PACKAGES
from posttrainbench.task.schemas import TaskSpec

NODEPS_INPUT = "ptb/requirements-nodeps.txt"
JUDGE_REQUIREMENTS = "ptb/requirements-judge.txt"
JUDGE_BUILD = "ptb/build_judge.sh"
VENV_INPUTS = ("requirements.txt", NODEPS_INPUT, "ptb/ptb_user_site.py", "ptb/build_venv.sh")
# The conversion code: the script and the modules `python -m ...prepare_model` imports.
MODEL_INPUTS = (
    "ptb/build_model.sh",
    "ptb/lib/posttrainbench/__init__.py",
    "ptb/lib/posttrainbench/task/evaluation/__init__.py",
    "ptb/lib/posttrainbench/task/evaluation/prepare_model.py",
)
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conversion_pins(*requirement_texts: str) -> str:
    """The requirement lines of :data:`CONVERSION_PACKAGES`, sorted, one per line."""
    wanted = {_normalized(name) for name in CONVERSION_PACKAGES}
    pins = []
    for text in requirement_texts:
        for line in text.splitlines():
            match = _REQUIREMENT.match(line.split("#", 1)[0])
            if match and _normalized(match.group(1)) in wanted:
                pins.append(line.split("#", 1)[0].strip())
    return "\n".join(sorted(pins, key=str.lower))


def model_task_layers(
    spec: TaskSpec, requirements: str, nodeps: str | None, judged: bool = False
) -> LayerManifest:
    """The layers of a model task whose venv is made from ``requirements`` (and ``nodeps``,
    the ``--no-deps`` requirements, when the task ships them); ``judged`` adds the judge
    client's layer (the task ships ``ptb/requirements-judge.txt`` and ``ptb/build_judge.sh``)."""
    venv_inputs = [rel for rel in VENV_INPUTS if rel != NODEPS_INPUT or nodeps is not None]
    # Above the model: the image's venv and model steps stay the same for every task on
    # the model, judged or not, as the local cache's entries do.
    judge = [
        LayerSpec(
            name="judge",
            inputs=[JUDGE_REQUIREMENTS, JUDGE_BUILD],
            build=JUDGE_BUILD,
            extends_venv=True,
        )
    ]
    return LayerManifest(
        layers=[
            LayerSpec(
                name="venv",
                inputs=venv_inputs,
                venv=True,
                requirements="requirements.txt",
                build="ptb/build_venv.sh",
            ),
            LayerSpec(
                name="model",
                inputs=list(MODEL_INPUTS),
                build="ptb/build_model.sh",
                key={
                    "model": spec.model,
                    "source": spec.model_source,
                    "packages": conversion_pins(requirements, nodeps or ""),
                },
            ),
            *(judge if judged else []),
            LayerSpec(name="task", inputs=["ptb"], build="ptb/build.sh"),
        ]
    )


@dataclass(frozen=True)
class DockerStep:
    """One layer as Dockerfile instructions: ``COPY source target`` lines, then ``RUN bash run``."""

    name: str
    copies: list[tuple[str, str]]
    run: str | None


def dockerfile_steps(manifest: LayerManifest) -> list[DockerStep]:
    """The Dockerfile's steps after its venv is made from the requirements: each layer's
    other inputs copied to where the local cache puts them, then its build step."""
    steps = []
    for layer in manifest.layers:
        copies = [
            (f"{rel}/" if destination(rel) == "" else rel, MODEL_LAYOUT.under(destination(rel)))
            for rel in layer.inputs
            if rel != layer.requirements
        ]
        run = MODEL_LAYOUT.under(destination(layer.build)) if layer.build else None
        steps.append(DockerStep(layer.name, copies, run))
    return steps
