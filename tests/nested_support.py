"""Helpers of the nested local-sandbox tests: an outer instance that runs inner ones.

The outer instance gets this repository, the harness's venv and its base interpreter bound
read-only at their own paths, so root inside can run this very file as the inner harness:
``python tests/nested_support.py NETWORK STEPS_JSON`` starts one inner
:class:`~posttrainbench.host.envs.local_sandbox.LocalSandboxEnvironment`, runs each
``[user, command]`` step in it and prints the results as one JSON line after
:data:`RESULT_MARK`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULT_MARK = "PTB-NESTED-RESULT "
# Inside the outer instance: the inner instances' layer cache (built once per outer).
INNER_CACHE = "/tmp/ptb-inner-cache"


def base_python() -> Path:
    """The harness's base interpreter (>= 3.12): the inner harness's sandbox Python too."""
    return Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))


def harness_mounts() -> list[dict[str, Any]]:
    """Read-only binds that let root in an outer instance run this repo's harness."""
    sources = [REPO, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    kept: list[Path] = []
    for source in sources:
        if not any(source == k or k in source.parents for k in kept):
            kept.append(source)
    return [{"type": "bind", "source": str(s), "target": str(s), "read_only": True} for s in kept]


def inner_command(network: str, steps: list[tuple[str | int, str]]) -> str:
    """The shell command with which the outer's root runs one inner instance through ``steps``."""
    env = {
        "PTB_CACHE_DIR": INNER_CACHE,
        "PTB_SANDBOX_PYTHON": str(base_python()),
        "HARBOR_TELEMETRY": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    python = Path(sys.prefix) / "bin" / "python"
    return (
        f"cd /tmp && {assignments} {shlex.quote(str(python))} "
        f"{shlex.quote(str(Path(__file__).resolve()))} {network} {shlex.quote(json.dumps(steps))}"
    )


def parse_result(stdout: str) -> list[dict[str, Any]]:
    """The inner harness's results (one dict per step), from the outer exec's stdout."""
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            result: list[dict[str, Any]] = json.loads(line[len(RESULT_MARK) :])
            return result
    raise AssertionError(f"the inner harness printed no result:\n{stdout}")


async def _run_inner(network: str, steps: list[list[Any]]) -> list[dict[str, Any]]:
    from harbor.models.task.config import NetworkMode

    from tests.sandbox_support import env_factory, write_task_env

    root = Path(tempfile.mkdtemp(dir="/tmp"))
    make = env_factory(root / "trial", write_task_env(root / "task"))
    env = make(network=NetworkMode(network))
    await env.start(force_build=False)
    results = []
    try:
        for user, command in steps:
            r = await env.exec(command, user=user, timeout_sec=60)
            results.append(
                {"user": user, "rc": r.return_code, "stdout": r.stdout, "stderr": r.stderr}
            )
    finally:
        await env.stop(delete=True)
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    results = asyncio.run(_run_inner(sys.argv[1], json.loads(sys.argv[2])))
    print(RESULT_MARK + json.dumps(results), flush=True)
