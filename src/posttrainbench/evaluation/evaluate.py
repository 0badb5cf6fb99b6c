"""Agent-facing evaluation: score a model directory on the task's benchmark.

    python -m posttrainbench.evaluation.evaluate --task /opt/ptb/task.json --model-path DIR [--limit N]

Prints accuracy and n; ``--json-out`` also writes :class:`Metrics` JSON. The default
``--limit`` is the task's ``agent_eval_limit``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..benchmarks import UnknownBenchmarkError, get_benchmark
from ..schemas import TaskSpec

DEFAULT_TASK = "/opt/ptb/task.json"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Evaluate a model on this task's benchmark")
    p.add_argument("--task", default=DEFAULT_TASK, type=Path)
    p.add_argument("--model-path", required=True)
    p.add_argument("--limit", type=int, default=None, help="number of questions (default: task's agent_eval_limit)")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--completions-out", type=Path, default=None, help="JSONL of completions and verdicts")
    p.add_argument("--backend", default=None)
    p.add_argument("--batch-size", type=int, default=None)
    args = p.parse_args(argv)

    from .backends import ModelLoadError
    from .runner import evaluate_model

    try:
        task = TaskSpec.load(args.task)
        bench = get_benchmark(task.benchmark)
    except (OSError, ValueError, UnknownBenchmarkError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    limit = args.limit if args.limit is not None else task.agent_eval_limit
    samples = bench.load("test", limit)
    rows: list = []
    try:
        metrics = evaluate_model(bench, samples, args.model_path, args.backend, args.batch_size, task.seed,
                                 completions_out=rows)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{bench.name}: accuracy {metrics.accuracy:.4f} (+/- {metrics.stderr:.4f}) "
          f"n={metrics.n} correct={metrics.n_correct} in {metrics.timings['total_s']:.0f}s")
    if args.json_out:
        metrics.dump(args.json_out)
    if args.completions_out:
        args.completions_out.parent.mkdir(parents=True, exist_ok=True)
        args.completions_out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
