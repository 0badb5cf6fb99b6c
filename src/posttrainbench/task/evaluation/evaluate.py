"""Evaluate a model directory on a benchmark split.

Agent-facing (inside a task, through ``/app/evaluate.py``), with PostTrainBench's
command line (``src/eval/tasks/<id>/evaluate.py``: the same flags and defaults)::

    python evaluate.py [--model-path final_model] [--limit N] [--json-output-file FILE]
        [--templates-dir templates/] [--max-tokens N] [--max-connections N]
        [--gpu-memory-utilization F]

scores the split the task's feedback mode allows: ``test`` (the scored test set),
``dev`` (a held-out split disjoint from it, optionally with a run budget) or ``none``
(no score at all); ``--json-output-file`` gets PostTrainBench's metrics JSON
(``accuracy``, ``stderr``). Standalone (``ptb eval``)::

    python -m posttrainbench.task.evaluation.evaluate --benchmark gsm8k --model-path DIR [--split test]
        [--max-new-tokens N] [--batch-size B] [--model-name NAME]

Prints accuracy and n; ``--json-out`` also writes :class:`Metrics` JSON.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
from pathlib import Path

from posttrainbench.core.model_task_layout import MODEL_LAYOUT

from ..benchmarks import UnknownBenchmarkError, get_benchmark
from ..benchmarks.datafiles import DataMissingError
from ..schemas import TaskSpec

DEFAULT_TASK = MODEL_LAYOUT.task_file


class FeedbackRefused(Exception):
    """The task's feedback mode or budget does not allow this evaluation."""


def _charge_budget(task: TaskSpec, state_dir: Path) -> str:
    """Count one evaluate.py run against the task's budget; refuse when it is spent.

    The counter lives in the agent's own environment, so it is a guard rail for honest
    agents, not a security boundary: what it protects (the dev split) is not the test set.
    """
    if task.agent_eval_budget is None:
        return ""
    state_dir.mkdir(parents=True, exist_ok=True)
    with (state_dir / "eval_budget.json").open("a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        used = int((json.loads(fh.read() or "{}")).get("used", 0))
        if used >= task.agent_eval_budget:
            raise FeedbackRefused(
                f"evaluation budget spent: {used} of {task.agent_eval_budget} runs used"
            )
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"used": used + 1}))
    return f" (evaluation {used + 1} of {task.agent_eval_budget})"


def _task_split(task: TaskSpec, root: Path) -> tuple[str, str]:
    if task.feedback == "none":
        raise FeedbackRefused(
            "this task gives no evaluation feedback (feedback mode 'none'): "
            "judge your model by your own means"
        )
    split = "test" if task.feedback == "test" else "dev"
    return split, _charge_budget(task, root / "state")


def _positive_int(text: str) -> int:
    """argparse type for counts: a zero or negative batch or token cap is a mistake."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Evaluate a model on a benchmark")
    p.add_argument(
        "--task", type=Path, default=None, help=f"task spec (inside a task: {DEFAULT_TASK})"
    )
    p.add_argument("--benchmark", default=None, help="benchmark id, without --task")
    p.add_argument("--split", default="test", help="split, with --benchmark")
    p.add_argument("--model-path", default="final_model")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="number of questions, -1 for all (default: PostTrainBench's for the benchmark)",
    )
    p.add_argument(
        "--json-output-file",
        type=Path,
        default=None,
        help="write PostTrainBench's metrics JSON (accuracy, stderr) here",
    )
    p.add_argument("--json-out", type=Path, default=None, help="write the full metrics here")
    p.add_argument(
        "--templates-dir",
        type=Path,
        default=None,
        help="the chat templates (inside a task: templates/, as PostTrainBench's)",
    )
    p.add_argument(
        "--model-name",
        default=None,
        help="the name whose model family picks the chat template (default: the path)",
    )
    p.add_argument(
        "--completions-out", type=Path, default=None, help="JSONL of completions and verdicts"
    )
    p.add_argument("--backend", default=None)
    p.add_argument(
        "--batch-size",
        "--max-connections",
        dest="batch_size",
        type=_positive_int,
        default=None,
        help="questions generated at once (PostTrainBench: --max-connections)",
    )
    p.add_argument(
        "--max-new-tokens",
        "--max-tokens",
        dest="max_new_tokens",
        type=_positive_int,
        default=None,
        help="cap on new tokens per completion (default: the benchmark's)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="vLLM's share of GPU memory (accepted for PostTrainBench's command line)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--progress",
        action="store_true",
        help="report loading and answers done on stderr (ptb eval, ptb baseline)",
    )
    p.add_argument(
        "--num-seeds",
        type=int,
        default=None,
        help="seeds for sampled benchmarks (default: benchmark's)",
    )
    return p


def _limit(requested: int | None, default: int | None) -> int | None:
    """PostTrainBench's --limit: -1 (or none given, with no default) means every question."""
    limit = default if requested is None else requested
    if limit is not None and limit < 1:
        if limit != -1:
            raise ValueError(f"invalid --limit {limit}: a positive count, or -1 for all")
        return None
    return limit


def _write_ptb_metrics(path: Path, benchmark_id: str, values: dict[str, float]) -> None:
    """The file PostTrainBench's evaluate.py writes: its task's metric values by name
    (BFCL's inspect task has accuracy only)."""
    from ..benchmarks.plugin import plugins

    plugin = plugins().get(benchmark_id)
    keys = plugin.posttrainbench.metrics if plugin and plugin.posttrainbench else ["accuracy"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({key: values[key] for key in keys}, indent=2))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ..benchmarks.llm_judge import JudgeConfigError
    from ..benchmarks.plugin import plugins
    from .backends import ModelLoadError
    from .chat_format import TemplateFamilyError
    from .runner import GenerationFailed, evaluate_model
    from .sampling import SamplingConfigError

    note = ""
    ptb_variant = False
    model_name, templates_dir = args.model_name, args.templates_dir
    try:
        if args.benchmark:
            bench, split, seed = get_benchmark(args.benchmark), args.split, args.seed
            limit = _limit(args.limit, None)
        else:
            task = TaskSpec.load(args.task or DEFAULT_TASK)
            bench, seed = get_benchmark(task.benchmark), task.seed
            plugin = plugins().get(task.benchmark)
            default = task.agent_eval_limit
            if default is None and plugin is not None:
                default = plugin.command_line.limit
            limit = _limit(args.limit, default)
            ptb_variant = task.variant == "posttrainbench"
            if args.max_new_tokens is None and ptb_variant and plugin:
                args.max_new_tokens = plugin.command_line.max_tokens  # its evaluate.py's
            # The final evaluation's template for the task's base model, from the
            # agent's own templates/ (PostTrainBench's default, relative to the cwd).
            model_name = model_name or task.model_source
            templates_dir = templates_dir or Path("templates")
            split, note = _task_split(task, Path(os.environ.get("PTB_ROOT", MODEL_LAYOUT.root)))
        samples = bench.load(split, limit)
    except (OSError, ValueError, UnknownBenchmarkError, DataMissingError, FeedbackRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows: list = []
    progress = None
    if args.progress:
        from .progress import LineProgress

        progress = LineProgress(f"{bench.name} [{split}]")
        progress.say(f"loading the model from {args.model_path}")
    try:
        metrics = evaluate_model(
            bench,
            samples,
            args.model_path,
            args.backend,
            args.batch_size,
            seed,
            completions_out=rows,
            num_seeds=args.num_seeds,
            split=split,
            max_new_tokens=args.max_new_tokens,
            progress=progress,
            model_name=model_name,
            templates_dir=templates_dir,
            model_sampling=ptb_variant,
        )
    except (
        ModelLoadError,
        GenerationFailed,
        JudgeConfigError,
        TemplateFamilyError,
        SamplingConfigError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{bench.name} [{split}]: accuracy {metrics.accuracy:.4f} (+/- {metrics.stderr:.4f}) "
        f"n={metrics.n} correct={metrics.n_correct} in {metrics.timings['total_s']:.0f}s{note}"
    )
    if args.json_out:
        metrics.dump(args.json_out)
    if args.json_output_file:
        _write_ptb_metrics(
            args.json_output_file,
            bench.id,
            {"accuracy": metrics.accuracy, "stderr": metrics.stderr},
        )
    if args.completions_out:
        args.completions_out.parent.mkdir(parents=True, exist_ok=True)
        args.completions_out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
