"""Time to the agent's first command on the local sandbox, and the environment cache's size.

With a private, empty ``PTB_CACHE_DIR``, compiles SmolLM2-135M tasks and runs one real
Harbor trial per step (local sandbox, a one-command agent, the separate verifier), in
this order:

  a   cold: bfcl, 0.5 h                          builds the venv, model and task layers
  r   reference: the same task again             everything cached (3 times, interleaved)
  b   bfcl at 1, 1.5, 2 h (differs in hours)     the goal: within 2x of r
  c   gsm8k, 0.5 h (another benchmark)           the goal: within 2x of r
  j   arenahardwriting, 0.5 h (LLM-judged)       the judge client's layer over the shared venv
  c   healthbench, 0.5 h (another benchmark)     shares j's judge layer: the goal again

then prints each step's time to the agent's first command, the layers it built, the
median of each group as a multiple of the reference's median, and the cache's size by
layer after this 4-benchmark x 1-model compile+start. The private cache is deleted at
the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench's agent

from first_command_agent import STAMP_FILE  # noqa: E402

MODEL = "smollm2-135m"
ENV = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
AGENT = "first_command_agent:FirstCommandAgent"
STEPS = [  # (group, what, benchmark, hours)
    ("a", "cold task", "bfcl", 0.5),
    ("r", "reference: fully cached task", "bfcl", 0.5),
    ("b", "differs only in hours", "bfcl", 1.0),
    ("c", "another benchmark, same model", "gsm8k", 0.5),
    ("r", "reference: fully cached task", "bfcl", 0.5),
    ("b", "differs only in hours", "bfcl", 1.5),
    ("j", "LLM-judged benchmark: judge layer", "arenahardwriting", 0.5),
    ("c", "another benchmark, same model", "healthbench", 0.5),
    ("b", "differs only in hours", "bfcl", 2.0),
    ("r", "reference: fully cached task", "bfcl", 0.5),
]


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def prepare_data(cache: Path) -> None:
    """The four benchmarks' data into the private cache (GSM8K from ../shared/data)."""
    from posttrainbench.host.data.importer import import_benchmark
    from posttrainbench.host.data.prepare import prepare_benchmark

    import_benchmark("gsm8k", REPO.parent / "shared" / "data" / "gsm8k", cache)
    for benchmark in sorted({step[2] for step in STEPS} - {"gsm8k"}):
        prepare_benchmark(benchmark, cache)


def compile_step(benchmark: str, hours: float, out: Path, cache: Path) -> Path:
    """A small CPU task (one scored question, a short verifier: the judges skip)."""
    from posttrainbench.host.tasks.compiler import compile_task
    from posttrainbench.host.tasks.options import CompileOptions

    options = CompileOptions(
        hours=hours, cpus=2, memory_gb=8, final_eval_limit=1, verifier_timeout_min=2
    )
    return compile_task(benchmark, MODEL, out, options, cache_dir=cache, offline=True)


def run_trial(task: Path, jobs: Path) -> tuple[float, float, str]:
    """One Harbor trial; (seconds to the agent's first command, whole trial, the command's user)."""
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    config = JobConfig(
        job_name=f"first-command-{task.parent.name}",
        jobs_dir=jobs,
        n_concurrent_trials=1,
        quiet=True,
        agents=[AgentConfig(import_path=AGENT)],
        tasks=[TaskConfig(path=task)],
        environment=EnvironmentConfig(import_path=ENV),
    )

    async def go() -> object:
        return await (await Job.create(config)).run()

    started = time.time()
    (trial,) = asyncio.run(go()).trial_results  # type: ignore[attr-defined]
    ended = time.time()
    trial_dir = Path(trial.trial_uri.removeprefix("file://"))
    stamp_file = trial_dir / "agent" / STAMP_FILE
    if not stamp_file.is_file():
        raise SystemExit(f"the agent never ran its command in {trial_dir}: {trial.exception_info}")
    stamp = json.loads(stamp_file.read_text())
    return stamp["at"] - started, ended - started, stamp["user"]


def entries(envs: Path) -> set[str]:
    return (
        {p.name for p in envs.iterdir() if p.is_dir() and not p.name.startswith((".", "failed"))}
        if envs.is_dir()
        else set()
    )


def size_mb(path: Path) -> float:
    out = subprocess.run(
        ["du", "-sk", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[0]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the private cache and the tasks")
    parser.add_argument(
        "--work",
        type=Path,
        default=REPO / ".cache" / "bench",
        help="where the private cache, tasks and jobs go (needs ~5 GB)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="env_cache-", dir=args.work))
    cache = work / "cache"
    os.environ["PTB_CACHE_DIR"] = str(cache)
    os.environ["HARBOR_TELEMETRY"] = "0"
    print(
        f"machine: {os.cpu_count()} cores; load at start {_load()}; private cache {cache}",
        flush=True,
    )
    try:
        prepare_data(cache)
        envs = cache / "envs"
        rows = []
        tasks: dict[tuple[str, float], Path] = {}  # the reference reruns the same task dir
        for i, (label, what, benchmark, hours) in enumerate(STEPS):
            if (benchmark, hours) not in tasks:
                tasks[benchmark, hours] = compile_step(
                    benchmark, hours, work / "tasks" / f"{benchmark}-{hours:g}h", cache
                )
            task = tasks[benchmark, hours]
            before = entries(envs)
            first, whole, user = run_trial(task, work / "jobs" / f"{i}-{label}")
            built = sorted(name.split("-", 1)[0] for name in entries(envs) - before)
            rows.append((label, what, benchmark, hours, first, whole, built, user))
            print(
                f"{label}  {what}: first command after {first:.1f} s (trial {whole:.1f} s), "
                f"built {built or 'nothing'}, load {_load()}",
                flush=True,
            )
        print(f"\nload at end {_load()}\n")
        groups = {
            group: statistics.median(row[4] for row in rows if row[0] == group)
            for group, *_ in STEPS
        }
        print(f"{'step':<58}{'first cmd s':>12}  layers built")
        for group, what, benchmark, hours, first, _whole, built, _user in rows:
            print(
                f"{f'{group}  {what}: {benchmark} {hours:g} h':<58}{first:>12.1f}  {', '.join(built) or '-'}"
            )
        print(f"\n{'group (median)':<24}{'first cmd s':>12}{'x reference':>13}")
        for group, median in groups.items():
            print(f"{group:<24}{median:>12.1f}{median / groups['r']:>13.2f}")
        by_layer: dict[str, list[float]] = {}
        for name in sorted(entries(envs)):
            by_layer.setdefault(name.split("-", 1)[0], []).append(size_mb(envs / name))
        print(
            f"\ncache after 4 benchmarks x 1 model: {size_mb(envs):.0f} MB in {sum(map(len, by_layer.values()))} "
            "layer entries"
        )
        for layer, sizes in by_layer.items():
            print(f"  {layer:<6} x{len(sizes)}: " + ", ".join(f"{s:.1f} MB" for s in sizes))
        assert all(row[7] == "agent" for row in rows), (
            "the first command did not run as the agent's user"
        )
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
