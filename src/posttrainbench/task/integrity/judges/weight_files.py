"""Which weight files of a model directory the verifier's loader reads.

The disallowed-model check must fingerprint exactly the tensors the verifier scores, so
it resolves the files the way ``transformers.AutoModelForCausalLM.from_pretrained``
does for a local directory (the pinned version, see task/evaluation/requirements.txt):

1. ``config.json``'s ``transformers_weights`` names the file (a ``.safetensors`` or
   ``.safetensors.index.json`` inside the directory), if set;
2. else ``model.safetensors``;
3. else ``model.safetensors.index.json`` and every shard its ``weight_map`` names;
4. else ``pytorch_model.bin`` (or its index): pickled weights, which the judge does
   not read.

The other loader, vLLM (GPU runs), reads every ``*.safetensors`` of the directory (the
index's shards only, when there is an index) and ignores ``transformers_weights``. So
any top-level ``*.safetensors`` the plan leaves out, or a ``transformers_weights``
redirect, means the two loaders may score different tensors than the judge checks: a
decoy. :attr:`LoadPlan.decoys` lists those; the judge flags them.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.weights import WEIGHT_SUFFIXES

SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")
# Files a trainer writes beside a model that no loader reads as weights.
TRAINING_FILES = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt")
MAX_INDEX_BYTES = 64 * 1024 * 1024


class LoadPlan(BaseModel):
    """The weight files the loader reads, and what the judge makes of the rest."""

    model_config = ConfigDict(extra="forbid")

    files: list[str] = Field(
        default_factory=list, description="safetensors files the loader reads, relative"
    )
    how: str = Field(description="which rule chose them")
    unreadable: str | None = Field(
        default=None, description="why the judge cannot read what is loaded"
    )
    decoys: list[str] = Field(
        default_factory=list, description="weight files or redirects that make loaders disagree"
    )
    unused: list[str] = Field(
        default_factory=list, description="other weight-like files no loader reads"
    )


def _read_json(path: Path, limit: int = MAX_INDEX_BYTES) -> dict:
    if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
        raise ValueError(f"{path.name} is not a plain file of at most {limit} bytes")
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"{path.name} is not a JSON object")
    return value


def _inside(model_dir: Path, name: str) -> bool:
    resolved = (model_dir / name).resolve()
    return resolved.is_relative_to(model_dir.resolve())


def _index_shards(model_dir: Path, index_name: str) -> list[str]:
    weight_map = _read_json(model_dir / index_name).get("weight_map")
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index_name} has no weight_map")
    shards = sorted({str(v) for v in weight_map.values()})
    outside = [s for s in shards if not _inside(model_dir, s)]
    if outside:
        raise ValueError(f"{index_name} names files outside the directory: {outside[:3]}")
    return shards


def resolve_load_plan(model_dir: Path) -> LoadPlan:
    """The loader's weight files in *model_dir* (see the module docstring)."""
    try:
        explicit = _read_json(model_dir / "config.json").get("transformers_weights")
    except (OSError, ValueError):
        explicit = None
    decoys: list[str] = []
    try:
        if explicit is not None:
            decoys.append(
                f"config.json sets transformers_weights={explicit!r}: transformers loads that file, "
                "vLLM ignores it"
            )
            name = str(explicit)
            if not _inside(model_dir, name) or not name.endswith(
                (".safetensors", ".safetensors.index.json")
            ):
                plan = LoadPlan(
                    how="transformers_weights",
                    unreadable=f"transformers_weights {name!r} is not "
                    "a safetensors file inside the directory",
                )
            elif name.endswith(".index.json"):
                plan = LoadPlan(
                    files=_index_shards(model_dir, name), how=f"transformers_weights index {name}"
                )
            else:
                plan = LoadPlan(files=[name], how=f"transformers_weights {name}")
        elif (model_dir / SAFE_WEIGHTS).is_file():
            plan = LoadPlan(files=[SAFE_WEIGHTS], how=SAFE_WEIGHTS)
        elif (model_dir / SAFE_INDEX).is_file():
            plan = LoadPlan(files=_index_shards(model_dir, SAFE_INDEX), how=SAFE_INDEX)
        elif any((model_dir / name).is_file() for name in PICKLED):
            plan = LoadPlan(
                how="pytorch_model.bin", unreadable="pickled weights (pytorch_model.bin)"
            )
        else:
            plan = LoadPlan(how="none", unreadable="no weight file the loader would read")
    except (OSError, ValueError) as exc:
        plan = LoadPlan(how="index", unreadable=f"unreadable index: {exc}")
    loaded = set(plan.files)
    for path in sorted(model_dir.rglob("*")):
        rel = path.relative_to(model_dir).as_posix()
        if rel in loaded or not path.name.endswith(WEIGHT_SUFFIXES) or path.name in TRAINING_FILES:
            continue
        if "/" not in rel and path.name.endswith(".safetensors"):
            decoys.append(
                f"{rel}: a weight file the loader used for scoring may not be the one checked "
                f"(transformers reads {', '.join(plan.files) or 'none'}; vLLM reads every *.safetensors)"
            )
        else:
            plan.unused.append(rel)
    plan.decoys = decoys
    return plan
