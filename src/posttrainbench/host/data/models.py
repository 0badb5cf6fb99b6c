"""Base models prepared on this machine, once, into the cache (`models/<id>/`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from posttrainbench.core.errors import PtbError
from posttrainbench.host.catalog.registry import BaseModelSpec


def prepare_models(
    specs: list[BaseModelSpec], cache: Path, *, force: bool, say: Callable[[str], None]
) -> dict[str, Path]:
    """Download (or reuse) each base model into `cache/models/<id>`; returns id -> dir."""
    from posttrainbench.host.envs.eval_env import evaluation_python, run_module

    prepared: dict[str, Path] = {}
    python = None
    for spec in specs:
        out = cache / "models" / spec.id
        prepared[spec.id] = out
        if (out / "config.json").is_file() and not force:
            say(f"{spec.id}: already at {out}")
            continue
        python = python or evaluation_python(say)
        say(f"{spec.id}: fetching from {spec.source} into {out} ...")
        code = run_module(
            python,
            "posttrainbench.task.evaluation.prepare_model",
            ["--source", spec.source, "--out", str(out)],
            {},
        )
        if code != 0:
            raise PtbError(f"preparing model {spec.id} from {spec.source} failed (exit {code})")
        say(f"{spec.id}: {out}")
    return prepared
