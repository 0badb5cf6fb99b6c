"""Build a task's local-sandbox environment layers before the Harbor job, showing progress.

Harbor would build it anyway when the first trial starts, but silently; building it
here lets the user watch a first run install packages and convert the base model.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.console import Console

from posttrainbench.core.errors import RunError
from posttrainbench.host.envs.env_cache import (
    Layer,
    ensure_layers,
    plan_layers,
    resolve_task_python,
)


def _building(layers: list[Layer]) -> tuple[str, Path] | None:
    """The layer being built now and its build log (None between layers)."""
    for layer in layers:
        for log in layer.build_logs():
            return layer.spec.name, log
    return None


def prebuild_local_environment(task_dir: Path, console: Console) -> list[Path]:
    """Build (or reuse) the cached layers of `task_dir`'s environment; return their entries."""
    environment_dir = task_dir / "environment"
    try:
        python = resolve_task_python(environment_dir)
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

    # The build's own output (pip's warnings included) goes to its log file only: the
    # spinner names the layer and the time, and a failure names the log. Without a
    # terminal (a log, CI) each layer is one plain line instead of a spinner.
    worker = threading.Thread(target=build, daemon=True)
    started = time.monotonic()
    shown: str | None = None
    with console.status("building the task environment (first run only)") as status:
        worker.start()
        while worker.is_alive():
            worker.join(timeout=1.0)
            current = _building(layers)
            if current is None:
                continue
            name, log = current
            if name != shown and not console.is_terminal:
                console.print(f"building layer {name} of the task environment (log: {log})")
            shown = name
            status.update(
                f"building the task environment (first run only): layer {name}, "
                f"{time.monotonic() - started:.0f}s"
            )
    if "error" in result:
        # One line: the failed step and the kept log (<cache>/envs/failed/<layer>.log).
        raise RunError(" ".join(str(result["error"]).split()))
    console.print(
        f"task environment: built {', '.join(result['built']) or 'nothing'} "
        f"({result['entries'][-1].parent})"
    )
    return result["entries"]


def prebuild_agent_clis(task_dir: Path, console: Console) -> Path:
    """Install (or reuse) the task's pinned agent CLIs in the cache before the Harbor job,
    saying so: the first install downloads about 1.3 GB from the npm registry."""
    from posttrainbench.host.envs.agent_clis import (
        AgentClisError,
        agent_clis_key,
        ensure_agent_clis,
    )
    from posttrainbench.host.envs.env_cache import cache_root

    envs_dir = cache_root() / "envs"
    try:
        key = agent_clis_key(task_dir / "environment")
        if not any(envs_dir.glob(f"agent_clis-{key}")):
            console.print(
                "installing the agent CLIs (first run only; about 1.3 GB from the npm registry)"
            )
        entry, installed = ensure_agent_clis(task_dir / "environment", envs_dir)
    except AgentClisError as exc:
        raise RunError(" ".join(str(exc).split())) from exc
    console.print(f"agent CLIs: {'installed' if installed else 'cached'} ({entry.name})")
    return entry
