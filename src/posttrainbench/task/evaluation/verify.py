"""Trusted final evaluation; always leaves ``reward.json`` and ``metrics.json``.

    python -m posttrainbench.task.evaluation.verify --task TASK.json \
        --model-path /logs/artifacts/final_model --out-dir /logs/verifier [--base-model-path DIR] \
        [--verifier-timeout-s S --started-at EPOCH]

With the verifier's timeout and start time, generation runs under the time limits of
:mod:`.time_budget` and ends before that timeout; while it runs, ``progress.json`` in the
out dir says how many questions are done (:mod:`.progress`).

The test set is read from ``$PTB_DATA_DIR`` (the sealed ``/tests/data``). A missing
or unloadable model scores 0 with ``error`` recorded and ``failure`` "no_model" (for one
the collect hook rejected, its reason from ``handoff.json``); so does a model whose
tokenizer or generation files differ from the base model's where they could rewrite
text (:mod:`.model_files`: the error names the file and field), and one whose
evaluation hangs past the deadline or crashes (:mod:`.watchdog`). A failure of the verifier's
own (task spec, benchmark, judge) has ``failure`` "verifier". Exit code 0 whenever the
reward was written; 2 only if the task spec itself is unreadable (reward 0 still written).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

from ..sandbox.handoff import Handoff
from ..schemas import BaseScore, Metrics, MetricsFailure, TaskSpec, write_reward
from . import watchdog
from .model_files import check_model_files, stage_scored_model
from .progress import ProgressFile
from .time_budget import Deadline

JUDGE_NOT_CONFIGURED = 3


def _zero_metrics(
    benchmark: str,
    model_path: str,
    error: str,
    seed: int = 0,
    attempts=(),
    failure: MetricsFailure = "no_model",
) -> Metrics:
    return Metrics(
        benchmark=benchmark,
        model_path=model_path,
        accuracy=0.0,
        stderr=0.0,
        n=0,
        n_correct=0,
        error=error,
        failure=failure,
        seed=seed,
        attempts=list(attempts),
    )


def _score_base(
    bench,
    samples,
    base_path: str,
    seed: int,
    deadline: Deadline | None,
    out_dir: Path,
    model_name: str,
    token_ladder: list[int] | None,
) -> BaseScore:
    from .runner import evaluate_model

    try:
        m = evaluate_model(
            bench,
            samples,
            base_path,
            seed=seed,
            deadline=deadline,
            progress=ProgressFile(out_dir, "base_model"),
            model_name=model_name,
            token_ladder=token_ladder,
            model_sampling=token_ladder is not None,
        )
        return BaseScore(
            model_path=base_path,
            accuracy=m.accuracy,
            stderr=m.stderr,
            n=m.n,
            n_correct=m.n_correct,
            model_sha256=m.model_sha256,
            timings=m.timings,
        )
    except Exception as exc:
        return BaseScore(
            model_path=base_path,
            accuracy=0.0,
            stderr=0.0,
            n=0,
            n_correct=0,
            error=f"{type(exc).__name__}: {exc}",
        )


def _bounded(fn, *args, kill_at: float | None, what: str):
    """*fn* in the watchdog's child, killed at *kill_at*; in this process without one
    (standalone scoring and tests: no deadline to hold)."""
    if kill_at is None:
        return fn(*args)
    return watchdog.call(fn, *args, kill_at=kill_at, what=what)


def _scored_model(
    model_path: str, base_model_path: str | None, scratch: Path
) -> tuple[str, str | None]:
    """(the directory to load, the rejection reason or None): final_model's files checked
    against the base's, then staged (:mod:`.model_files`). Without a base (standalone
    scoring) there is nothing to check against: final_model is loaded as it is."""
    if not base_model_path or not Path(base_model_path).is_dir():
        return model_path, None
    verdict = check_model_files(Path(model_path), Path(base_model_path))
    for finding in verdict.findings:
        print(f"[verify] final_model {finding.line()}", file=sys.stderr)
    if verdict.rejected:
        return model_path, verdict.reason()
    return str(stage_scored_model(Path(model_path), Path(base_model_path), scratch / "model")), None


def _evaluate_final(
    bench,
    samples,
    model_path: str,
    task: TaskSpec,
    deadline: Deadline | None,
    out_dir: Path,
    ladder: list[int] | None,
) -> tuple[Metrics, int]:
    """The final model's metrics and exit code (run in the watchdog's child)."""
    from ..benchmarks.llm_judge import JudgeConfigError
    from .runner import evaluate_model

    rows: list[dict] = []
    try:
        metrics = evaluate_model(
            bench,
            samples,
            model_path,
            seed=task.seed,
            completions_out=rows,
            deadline=deadline,
            progress=ProgressFile(out_dir, "final_model"),
            # PostTrainBench's template for the task's base model, whatever the
            # final model ships or its directory is called.
            model_name=task.model_source,
            token_ladder=ladder,
            # The posttrainbench variant decodes as its vLLM server does.
            model_sampling=task.variant == "posttrainbench",
        )
    except JudgeConfigError as exc:
        return _zero_metrics(
            task.benchmark,
            model_path,
            f"judge not configured: {exc}",
            task.seed,
            failure="verifier",
        ), JUDGE_NOT_CONFIGURED
    except Exception as exc:
        traceback.print_exc()
        return _zero_metrics(
            task.benchmark,
            model_path,
            f"{type(exc).__name__}: {exc}",
            task.seed,
            getattr(exc, "attempts", ()),
        ), 0
    write_samples(out_dir / SAMPLES_FILE, rows)
    return metrics, 0


SAMPLES_FILE = "samples.jsonl"
SAMPLE_CHARS = 4000  # of each completion: enough to see what the model did


def write_samples(path: Path, rows: list[dict]) -> None:
    """Each question's verdict and the head of the final model's completion, for the run
    page (display only: the score is metrics.json's)."""
    lines = [
        json.dumps(
            {
                "id": r["id"],
                "seed": r["seed"],
                "score": r["score"],
                "error_type": r["error_type"],
                "completion": str(r["completion"])[:SAMPLE_CHARS],
            }
        )
        + "\n"
        for r in rows
    ]
    try:  # display only: a file it cannot write never changes the score
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines), encoding="utf-8")
    except OSError as exc:
        print(f"warning: per-question results not written: {exc}", file=sys.stderr)


def token_ladder(task: TaskSpec) -> list[int] | None:
    """The final evaluation's token caps: PostTrainBench's max tokens, then its cascade's
    reduced values (run_task.sh); None for the smoke variant (the benchmark's own cap)."""
    from ..benchmarks.plugin import plugins

    plugin = plugins().get(task.benchmark)
    if task.variant != "posttrainbench" or plugin is None:
        return None
    return plugin.command_line.token_ladder


def run(
    task_path: Path,
    model_path: str,
    out_dir: Path,
    base_model_path: str | None,
    deadline: Deadline | None = None,
    kill_at: float | None = None,
) -> tuple[Metrics, int]:
    """Score the final model (then the base model, when the task asks); (metrics, exit code).

    With *base_model_path*, final_model's files are checked against the base's and the
    scored directory holds only what :mod:`.model_files` lets through; a rejected model
    scores 0 with the file and field named. With *kill_at* (the CLI sets it from the
    verifier's timeout), the model's evaluation runs in a child process killed then
    (:mod:`.watchdog`): a hang or crash scores 0 with the reason.
    """
    try:
        task = TaskSpec.load(task_path)
    except Exception as exc:
        return _zero_metrics(
            "unknown", model_path, f"bad task spec {task_path}: {exc}", failure="verifier"
        ), 2
    try:
        from ..benchmarks import get_benchmark

        bench = get_benchmark(task.benchmark)
        samples = bench.load("test", task.final_eval_limit)
    except Exception as exc:
        return _zero_metrics(
            task.benchmark,
            model_path,
            f"cannot load benchmark: {exc}",
            task.seed,
            failure="verifier",
        ), 2
    ladder = token_ladder(task)
    if not Path(model_path).is_dir():
        # The collect hook says why it handed no model over (e.g. over the size cap).
        handoff = Handoff.read(Path(model_path).parent)
        reason = (handoff.error() if handoff else None) or f"final model not found at {model_path}"
        metrics = _zero_metrics(task.benchmark, model_path, reason, task.seed)
    else:
        with tempfile.TemporaryDirectory(prefix="ptb-scored-model-") as scratch:
            scored, rejection = _scored_model(model_path, base_model_path, Path(scratch))
            if rejection is not None:
                metrics = _zero_metrics(task.benchmark, model_path, rejection, task.seed)
            else:
                try:
                    metrics, code = _bounded(
                        _evaluate_final,
                        bench,
                        samples,
                        scored,
                        task,
                        deadline,
                        out_dir,
                        ladder,
                        kill_at=kill_at,
                        what="the final model's evaluation",
                    )
                except watchdog.ModelFailure as exc:
                    metrics, code = (
                        _zero_metrics(task.benchmark, model_path, str(exc), task.seed),
                        0,
                    )
                if code:
                    return metrics, code
                metrics = metrics.model_copy(update={"model_path": model_path})
    if task.score_base_model and base_model_path:
        try:
            base = _bounded(
                _score_base,
                bench,
                samples,
                base_model_path,
                task.seed,
                deadline,
                out_dir,
                task.model_source,
                ladder,
                kill_at=kill_at,
                what="the base model's evaluation",
            )
        except watchdog.ModelFailure as exc:
            base = BaseScore(
                model_path=base_model_path,
                accuracy=0.0,
                stderr=0.0,
                n=0,
                n_correct=0,
                error=str(exc),
            )
        metrics = metrics.model_copy(update={"base_model": base})
    return metrics, 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Trusted final evaluation (writes reward.json)")
    p.add_argument("--task", required=True, type=Path)
    p.add_argument("--model-path", required=True)
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--base-model-path", default=None)
    p.add_argument(
        "--verifier-timeout-s",
        type=float,
        default=None,
        help="the task's verifier timeout: generation ends before it (default: no time limits)",
    )
    p.add_argument(
        "--started-at",
        type=float,
        default=None,
        help="when the verifier started (epoch seconds; default: now)",
    )
    args = p.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    deadline = kill_at = None
    if args.verifier_timeout_s is not None:
        started = args.started_at or time.time()
        deadline = Deadline.for_verifier(args.verifier_timeout_s, started)
        kill_at = watchdog.kill_time(args.verifier_timeout_s, started)
    try:
        metrics, code = run(
            args.task, args.model_path, args.out_dir, args.base_model_path, deadline, kill_at
        )
    except BaseException as exc:  # last resort: reward.json must exist
        write_reward(args.out_dir / "reward.json", 0.0)
        _zero_metrics(
            "unknown", args.model_path, f"verifier crashed: {exc!r}", failure="verifier"
        ).dump(args.out_dir / "metrics.json")
        raise
    metrics.dump(args.out_dir / "metrics.json")
    if code == JUDGE_NOT_CONFIGURED:
        print(f"error: {metrics.error}", file=sys.stderr)
        return code
    write_reward(args.out_dir / "reward.json", metrics.accuracy)
    line = f"reward {metrics.accuracy:.4f} n={metrics.n}"
    if metrics.error:
        line += f" error: {metrics.error}"
    if metrics.base_model is not None:
        line += f" (base {metrics.base_model.accuracy:.4f})"
    print(line, file=sys.stderr if metrics.error else sys.stdout)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
