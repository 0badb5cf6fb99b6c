"""Results export and collect over N Harbor trial directories (default 10,000).

Writes N real-shaped trial directories (Harbor's own `TrialResult` models, verifier
metrics, five verdicts, a trace and a code snapshot each) as a sweep of agents x 7
benchmarks x 4 base models x attempts, then measures in one run:

  * the floor: reading and JSON-parsing every file a collector must read (result.json,
    metrics.json, the verdicts), nothing else;
  * `ptb results export` into a new store (reads, validates, copies, one rename per run);
  * the same export again (nothing new: the incremental path);
  * `ptb results collect` (load and validate every record, build the leaderboard, write
    the JSON and CSV files);
  * `ptb report` (the same load, then one HTML file with a page per run);

and prints seconds and each one's ratio to the floor.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the trial writer lives with the tests

from posttrainbench.catalog import list_benchmarks, list_models  # noqa: E402
from posttrainbench.results.collect import collect  # noqa: E402
from posttrainbench.results.export import export  # noqa: E402
from posttrainbench.results.outputs import write_leaderboard  # noqa: E402
from posttrainbench.results.reference_scores import load_weights  # noqa: E402
from posttrainbench.results.report.render import render_report, write_report  # noqa: E402
from posttrainbench.results.store import ResultsStore  # noqa: E402
from tests.results_fixtures import T0, TrialSpec, write_trial  # noqa: E402

AGENTS = [
    ("claude-code", "anthropic/claude-opus-4-1"),
    ("codex", "openai/gpt-5"),
    ("gemini-cli", "google/gemini-3-pro"),
    ("opencode", "zai/glm-4.6"),
    ("terminus-2", "openai/gpt-5-mini"),
]


def write_sweep(root: Path, n: int, rng: random.Random) -> None:
    """N trials spread over jobs of at most 500 trials, like a real sweep's job dirs."""
    benchmarks = [b.id for b in list_benchmarks()]
    models = [m.id for m in list_models() if not m.offline]
    for i in range(n):
        agent, agent_model = AGENTS[i % len(AGENTS)]
        roll = rng.random()
        spec = TrialSpec(
            agent=agent,
            agent_model=agent_model,
            benchmark=benchmarks[(i // 5) % len(benchmarks)],
            model=models[(i // 35) % len(models)],
            score=round(rng.random(), 4),
            base_score=0.1,
            started=T0 + timedelta(minutes=i),
            agent_hours=rng.uniform(0.5, 10),
            error="AgentTimeoutError" if roll < 0.05 else None,
            flagged=("contamination",) if 0.05 <= roll < 0.08 else (),
            cost_usd=round(rng.uniform(1, 60), 2),
        )
        write_trial(root / f"job-{i // 500:03d}", spec)


def floor(root: Path) -> float:
    """Seconds to read and parse what any collector must read."""
    started = time.perf_counter()
    for result in root.glob("*/*/result.json"):
        json.loads(result.read_bytes())
        verifier = result.parent / "verifier"
        for path in [verifier / "metrics.json", *verifier.glob("judgement_*.json")]:
            if path.is_file():
                json.loads(path.read_bytes())
    return time.perf_counter() - started


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument(
        "--keep", type=Path, default=None, help="Work in this directory and keep it."
    )
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="ptb-bench-collect-"))
    jobs, store_dir = work / "jobs", work / "results"
    try:
        print(f"writing {args.trials} trial directories under {jobs} ...", flush=True)
        _, t_write = timed(lambda: write_sweep(jobs, args.trials, random.Random(0)))
        print(f"  written in {t_write:.1f} s")
        t_floor = floor(jobs)
        summary, t_export = timed(lambda: export([jobs], store_dir))
        again, t_again = timed(lambda: export([jobs], store_dir))

        def collect_all():
            records, skipped = ResultsStore.open(store_dir, create=False).load()
            board = collect(
                records,
                results_dir=store_dir,
                policy="mean",
                weights=load_weights(),
                skipped=skipped,
            )
            write_leaderboard(board, store_dir / "leaderboard")
            return board

        board, t_collect = timed(collect_all)

        def report_all():
            records, skipped = ResultsStore.open(store_dir, create=False).load()
            board = collect(
                records,
                results_dir=store_dir,
                policy="mean",
                weights=load_weights(),
                skipped=skipped,
            )
            return write_report(render_report(board, records, store_dir), work / "report.html")

        report, t_report = timed(report_all)
        assert len(summary.added) == args.trials and not summary.skipped, summary.skipped[:3]
        assert again.unchanged == args.trials and not again.added
        assert len(board.runs) == args.trials
        print(f"\n{args.trials} trials, {len(board.agents)} agents, {len(board.cells)} cells\n")
        print(f"{'step':<34}{'seconds':>9}{'x floor':>9}")
        for name, seconds in (
            ("floor: read + parse the inputs", t_floor),
            ("export (new store)", t_export),
            ("export again (nothing new)", t_again),
            ("collect (load, leaderboard, files)", t_collect),
            ("report (load, leaderboard, HTML)", t_report),
        ):
            print(f"{name:<34}{seconds:>9.2f}{seconds / t_floor:>9.1f}")
        print(f"\nreport.html: {report.stat().st_size / 1e6:.1f} MB")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
