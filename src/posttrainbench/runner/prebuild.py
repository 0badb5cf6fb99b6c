"""Build a task's local-sandbox environment layers before the Harbor job, showing progress.

Harbor would build it anyway when the first trial starts, but silently; building it
here lets the user watch a first run install packages and convert the base model.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.console import Console

from posttrainbench.envs.env_cache import Layer, ensure_layers, plan_layers, resolve_sandbox_python
from posttrainbench.errors import RunError


def _last_line(layers: list[Layer]) -> str:
    for layer in layers:
        for log in layer.build_logs():
            lines = log.read_text(errors="replace").strip().splitlines()
            if lines:
                return f"{layer.spec.name}: {lines[-1][:100]}"
    return ""


def prebuild_local_environment(task_dir: Path, console: Console) -> list[Path]:
    """Build (or reuse) the cached layers of `task_dir`'s environment; return their entries."""
    environment_dir = task_dir / "environment"
    try:
        python = resolve_sandbox_python()
        layers = plan_layers(environment_dir, python)
    except RuntimeError as exc:  # no sandbox Python (a bad layer manifest is a PtbError already)
        raise RunError(str(exc)) from exc
    if all(layer.built for layer in layers):
        console.print(
            f"task environment: cached ({', '.join(layer.entry.name[:17] for layer in layers)})"
        )
        return [layer.entry for layer in layers]
    result: dict = {}

    def build() -> None:
        try:
            result["entries"], result["built"] = ensure_layers(environment_dir, python)
        except Exception as exc:  # reported below, on the main thread
            result["error"] = exc

    worker = threading.Thread(target=build, daemon=True)
    with console.status("building the task environment (first run only)") as status:
        worker.start()
        while worker.is_alive():
            worker.join(timeout=1.0)
            line = _last_line(layers)
            if line:
                status.update(f"building the task environment (first run only): {line}")
    if "error" in result:
        raise RunError(str(result["error"]).splitlines()[0])
    console.print(
        f"task environment: built {', '.join(result['built']) or 'nothing'} "
        f"({result['entries'][-1].parent})"
    )
    return result["entries"]
