"""The Python environment that runs evaluations on the host (`ptb eval`, `ptb baseline`).

The host package stays free of torch. Evaluation runs in, by preference:
``$PTB_EVAL_PYTHON``; this interpreter when it already has torch and transformers (a GPU
node with its own stack); else a venv built once from the task environment's
requirements with the sandbox Python (the same interpreter choice as the task layers),
an entry of the layer cache (``<cache>/envs/eval-<hash>``: ``ptb cache list`` shows it,
``ptb cache prune`` removes it when unused, a killed build leaves nothing the next one
does not clear), built under its lock in ``.build-<name>-*`` and renamed into place only
when complete, and held while a command uses it.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from posttrainbench.core.errors import RunError
from posttrainbench.host.envs.cache_admin import (
    build_dir_prefix,
    hold_for_process,
    remove_orphan_builds,
)
from posttrainbench.host.envs.env_cache import cache_root, resolve_sandbox_python
from posttrainbench.host.payload import TASK, package_root

EVAL_PYTHON_ENV = "PTB_EVAL_PYTHON"
EVAL_LAYER = "eval"  # its name in the layer cache, as `ptb cache list` shows it


def _requirement_files() -> list[Path]:
    evaluation = package_root() / TASK / "evaluation"
    return [
        evaluation / n
        for n in ("requirements.txt", "requirements-judge.txt", "requirements-nodeps.txt")
    ]


def _host_has_stack() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def evaluation_python(log=print) -> str:
    """Path of a Python that can run ``posttrainbench.task.evaluation`` (building it if needed)."""
    explicit = os.environ.get(EVAL_PYTHON_ENV)
    if explicit:
        return explicit
    if _host_has_stack():
        return sys.executable
    python = resolve_sandbox_python()
    files = [p for p in _requirement_files() if p.is_file()]
    h = hashlib.sha256(f"{python.executable}:{python.version}".encode())
    for p in files:
        h.update(p.read_bytes())
    root = cache_root() / "envs"
    entry = root / f"{EVAL_LAYER}-{h.hexdigest()[:16]}"
    root.mkdir(parents=True, exist_ok=True)
    hold_for_process(entry)  # before looking: from now on no prune removes it under us
    if (entry / "bin" / "python").exists():
        return str(entry / "bin" / "python")
    with (root / f"{entry.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (entry / "bin" / "python").exists():
            return str(entry / "bin" / "python")
        remove_orphan_builds(root, entry.name)  # a killed build's; we hold its lock
        log(f"building the evaluation environment in {entry} (once; a few minutes)")
        staging = Path(tempfile.mkdtemp(prefix=build_dir_prefix(entry.name), dir=root))
        try:
            steps = [[str(python.executable), "-m", "venv", str(staging)]]
            pip = [str(staging / "bin" / "python"), "-m", "pip", "install", "-q"]
            for p in files:
                steps.append(pip + (["--no-deps"] if "nodeps" in p.name else []) + ["-r", str(p)])
            started = time.monotonic()
            for i, argv in enumerate(steps, 1):
                # pip is quiet (-q): a line per step, so minutes of installing are not silent
                log(
                    f"  step {i}/{len(steps)}: {' '.join(argv[-2:])} ({time.monotonic() - started:.0f}s)"
                )
                proc = subprocess.run(argv, capture_output=True, text=True)
                if proc.returncode != 0:
                    last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                    raise RunError(
                        f"building the evaluation environment failed at `{' '.join(argv[-3:])}`: {last}"
                    )
            # venvs are not relocatable for console scripts, but `bin/python -m` is,
            # which is all we use.
            os.replace(staging, entry)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return str(entry / "bin" / "python")


def run_module(python: str, module: str, args: list[str], env_extra: dict[str, str]) -> int:
    """Run ``python -m module args`` with this package importable; stream its output.

    When stderr is not a terminal (a log file, CI), the Hugging Face and tqdm progress
    bars are switched off: their carriage-return redraws would fill the log with one
    enormous line. The module's own plain progress lines still appear."""
    package_parent = package_root().parent
    env = {**os.environ, **env_extra}
    if not sys.stderr.isatty():
        env.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        env.setdefault("TQDM_DISABLE", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(package_parent), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    return subprocess.run([python, "-m", module, *args], env=env).returncode
