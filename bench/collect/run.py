"""Results export and collect over N Harbor trial directories (default 5,000), through the CLI.

Writes N real-shaped trial directories (sweep.py: Harbor's own `TrialResult` models,
verifier metrics, five verdicts, a 1-100 KB trace, some cut mid-line, some trials copied
into a backup job), then measures in one run, each `ptb` step as a subprocess exactly as
a user runs it:

  * the floor: reading and JSON-parsing every JSON file a collector must read
    (result.json, verifier/task.json, metrics.json, the verdicts), nothing else, in this
    process;
  * `ptb results export` into a new store, --pairs times, alternating with the floor: on
    this shared 2-core machine the floor alone moves by 10-25% within minutes, so each
    export is set against the mean of the floors measured just before and just after it,
    and the median of these ratios is the figure (every one is printed);
  * the same export again (nothing new: the store's index, a few stats per trial);
  * the same export after one trial's verdict changed (that one run is replaced);
  * `ptb results collect` and `ptb report`;

and prints seconds and each one's ratio to the floor (the later steps: to the median
floor), with the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "src"))

from sweep import write_sweep  # noqa: E402

PTB = REPO / ".venv" / "bin" / "ptb"
GOALS = {"export (new store; medians)": 3.0, "export again (nothing new)": 1.1}


def floor(root: Path) -> float:
    """Seconds to read and parse the JSON files any collector must read."""
    started = time.perf_counter()
    for result in root.glob("*/*/result.json"):
        json.loads(result.read_bytes())
        verifier = result.parent / "verifier"
        for path in [verifier / "task.json", verifier / "metrics.json"]:
            if path.is_file():
                json.loads(path.read_bytes())
        for path in verifier.glob("judgement_*.json"):
            json.loads(path.read_bytes())
    return time.perf_counter() - started


def ptb(*args: str) -> tuple[float, str]:
    """Run `ptb ARGS` as a subprocess; (wall seconds, stdout). Stops the bench on failure."""
    env = {**os.environ, "HARBOR_TELEMETRY": "0"}
    started = time.perf_counter()
    done = subprocess.run([str(PTB), *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"ptb {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def load() -> str:
    """The 1, 5 and 15 minute load averages (other jobs on a shared machine skew timings)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5_000)
    parser.add_argument(
        "--pairs",
        type=int,
        default=5,
        help="First exports, each between two floor runs; the median ratio is the result.",
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="Work in this new directory and keep it."
    )
    args = parser.parse_args()
    if args.trials < 1 or args.pairs < 1:
        print("error: --trials and --pairs must be positive integers", file=sys.stderr)
        return 2
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        # Trials written next to an earlier run's would be counted with them.
        print(f"error: --keep {args.keep} is not empty; give a new directory", file=sys.stderr)
        return 2
    work = args.keep or Path(tempfile.mkdtemp(prefix="ptb-bench-collect-"))
    jobs, store = work / "jobs", work / "results"
    try:
        print(f"writing {args.trials} trial directories under {jobs} ...", flush=True)
        started = time.perf_counter()
        copies = write_sweep(jobs, args.trials, random.Random(0))
        print(f"  written in {time.perf_counter() - started:.1f} s ({copies} backup copies)")
        load_start = load()
        t_start, _ = ptb("results", "--help")  # interpreter + CLI start-up, for reference
        floors = [floor(jobs)]
        exports: list[float] = []  # first exports, each between floors[i] and floors[i + 1]
        for i in range(args.pairs):
            if i:
                shutil.rmtree(store)  # every first export writes a new store
            t_export, out = ptb("results", "export", str(jobs), "-o", str(store), "--json")
            exports.append(t_export)
            floors.append(floor(jobs))
            first = json.loads(out)
            assert len(first["added"]) == args.trials, first["skipped"][:3]
            assert len(first["skipped"]) == copies  # each backup copy: the same trial, skipped
        t_again, out = ptb("results", "export", str(jobs), "-o", str(store), "--json")
        again = json.loads(out)
        verdict = next((jobs / "job-000").glob("*/verifier/judgement_*.json"))
        verdict.write_text(verdict.read_text())  # a new mtime: `ptb judge` ran again
        t_changed, out = ptb("results", "export", str(jobs), "-o", str(store), "--json")
        changed = json.loads(out)
        t_collect, _ = ptb("results", "collect", str(store), "--json")
        t_report, _ = ptb("report", str(store), "-o", str(work / "report.html"))
        load_end = load()
        assert again["unchanged"] == args.trials and not again["added"] and not again["updated"]
        assert len(changed["updated"]) == 1 and changed["unchanged"] == args.trials - 1
        print(f"\n{args.trials} trials (+{copies} copies), load average {load_start} -> {load_end}")
        ratios = []
        for i, export_s in enumerate(exports):
            around = (floors[i] + floors[i + 1]) / 2
            ratios.append(export_s / around)
            print(
                f"first export {i + 1}: {export_s:.2f} s, floors around it "
                f"{floors[i]:.2f} and {floors[i + 1]:.2f} s: {ratios[-1]:.2f}x"
            )
        base = statistics.median(floors)
        ratio = statistics.median(ratios)
        print(f"first export: median {ratio:.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f})\n")
        print(f"{'step':<46}{'seconds':>9}{'x floor':>9}  goal")
        rows = [
            ("floor: read + parse the JSON inputs (median)", base, 1.0),
            ("ptb start-up (results --help)", t_start, t_start / base),
            ("export (new store; medians)", statistics.median(exports), ratio),
        ] + [
            (name, seconds, seconds / base)
            for name, seconds in (
                ("export again (nothing new)", t_again),
                ("export again (one verdict changed)", t_changed),
                ("collect (load, leaderboard, files)", t_collect),
                ("report (load, leaderboard, HTML)", t_report),
            )
        ]
        for name, seconds, times in rows:
            goal = GOALS.get(name)
            verdict_text = f"<= {goal}x: {'met' if times <= goal else 'MISSED'}" if goal else ""
            print(f"{name:<46}{seconds:>9.2f}{times:>9.2f}  {verdict_text}")
        size = (work / "report.html").stat().st_size / 1e6
        print(f"\nreport.html: {size:.1f} MB")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
