"""Build a task's local-sandbox environment before the Harbor job, showing progress.

Harbor would build it anyway when the first trial starts, but silently; building it
here lets the user watch a first run install packages and convert the base model.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.console import Console

from posttrainbench.envs.env_cache import (
    BUILD_LOG_NAME,
    cache_root,
    compute_cache_key,
    ensure_built,
    resolve_sandbox_python,
)
from posttrainbench.errors import RunError


def _last_line(envs_dir: Path, key: str) -> str:
    for log in envs_dir.glob(f".build-{key[:12]}-*/{BUILD_LOG_NAME}"):
        lines = log.read_text(errors="replace").strip().splitlines()
        if lines:
            return lines[-1][:100]
    return ""


def prebuild_local_environment(task_dir: Path, console: Console) -> Path:
    """Build (or reuse) the cached environment of `task_dir`; return the cache entry."""
    environment_dir = task_dir / "environment"
    try:
        python = resolve_sandbox_python()
    except RuntimeError as exc:
        raise RunError(str(exc)) from exc
    key = compute_cache_key(environment_dir, python)
    envs_dir = cache_root() / "envs"
    if (envs_dir / key).is_dir():
        console.print(f"task environment: cached ({envs_dir / key})")
        return envs_dir / key
    result: dict = {}

    def build() -> None:
        try:
            result["entry"] = ensure_built(environment_dir, python)[0]
        except Exception as exc:  # reported below, on the main thread
            result["error"] = exc

    worker = threading.Thread(target=build, daemon=True)
    with console.status("building the task environment (first run only)") as status:
        worker.start()
        while worker.is_alive():
            worker.join(timeout=1.0)
            line = _last_line(envs_dir, key)
            if line:
                status.update(f"building the task environment (first run only): {line}")
    if "error" in result:
        raise RunError(str(result["error"]).splitlines()[0])
    console.print(f"task environment: built ({result['entry']})")
    return result["entry"]
