"""Run the judges inside the verifier, after the reward is written.

Usage: python -m posttrainbench.task.integrity.judges.run --artifacts /logs/artifacts
           --task /tests/task.json --reference /tests/data/BENCH/test.jsonl
           --base-model /opt/ptb/models/base --workspace /app --out-dir /logs/verifier
           [--judges a,b] [--llm-votes N] [--override FILE] [--allow-api PROVIDER ...]
           [--limits FILE] [--total-time-s S]

Reads ``final_model/``, ``code_snapshot/``, ``data_files/``, ``write_set/`` and
``agent_logs/`` under the artifacts directory. Judges never change the reward: a judge
that fails writes an error judgement and the others still run; one past its cap is
judged incomplete; this command then exits 0. Only unusable arguments (exit 2) stop it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputError, JudgeInputs
from posttrainbench.task.integrity.judges.limits import JudgeLimits
from posttrainbench.task.integrity.judges.precedence import load_overrides
from posttrainbench.task.integrity.judges.runner import parse_judge_ids, run_judges

VOTES_ENV = "PTB_INTEGRITY_LLM_VOTES"


def inputs_from_artifacts(
    artifacts: Path,
    task: Path,
    reference: Path | None,
    base_model: Path | None,
    workspace: Path | None,
    allowed_apis: list[str],
    verifier_metrics: Path | None = None,
) -> JudgeInputs:
    """JudgeInputs for the verifier's layout (the task's task.json names the benchmark)."""
    from posttrainbench.task.schemas import TaskSpec

    try:
        spec = TaskSpec.load(task)
    except (OSError, ValueError) as exc:
        raise JudgeInputError(f"cannot read task file {task}: {exc}") from None

    def existing(path: Path | None) -> Path | None:
        return path if path is not None and path.exists() else None

    return JudgeInputs(
        benchmark=spec.benchmark,
        feedback=spec.feedback,
        base_model_source=spec.model_source,
        final_model=existing(artifacts / "final_model"),
        code_snapshot=existing(artifacts / "code_snapshot"),
        data_files=existing(artifacts / "data_files"),
        agent_logs=[artifacts / "agent_logs"],
        # Always named: a run whose collect hook staged no write set is never judged clean.
        write_set=artifacts / "write_set",
        reference=reference,
        base_model=existing(base_model),
        pristine_workspace=existing(workspace),
        allowed_apis=allowed_apis,
        verifier_metrics=existing(verifier_metrics),
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--task", type=Path, required=True)
    parser.add_argument("--reference", type=Path, default=None)
    parser.add_argument("--base-model", type=Path, default=None)
    parser.add_argument("--workspace", type=Path, default=None, help="the task's pristine /app")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--judges", default=None, help="comma-separated judge ids (default: all)")
    parser.add_argument(
        "--llm-votes",
        type=int,
        default=None,
        help=f"LLM votes per judge (default ${VOTES_ENV} or 1)",
    )
    parser.add_argument("--override", type=Path, default=None)
    parser.add_argument(
        "--allow-api", action="append", default=[], help="a provider id the agent may call"
    )
    parser.add_argument(
        "--limits", type=Path, default=None, help="judge caps (JSON, see judges.limits)"
    )
    parser.add_argument(
        "--total-time-s", type=float, default=None, help="all judges' wall-clock cap"
    )
    args = parser.parse_args(argv)
    try:
        votes = (
            args.llm_votes
            if args.llm_votes is not None
            else int(os.environ.get(VOTES_ENV, "1") or 1)
        )
        judges = parse_judge_ids(args.judges)
        overrides = load_overrides(args.override) if args.override else {}
        inputs = inputs_from_artifacts(
            args.artifacts,
            args.task,
            args.reference,
            args.base_model,
            args.workspace,
            args.allow_api,
            # the verifier wrote it just before (test.sh): final and base scores
            verifier_metrics=args.out_dir / "metrics.json",
        )
        limits = JudgeLimits.load(args.limits) if args.limits else JudgeLimits()
        if args.total_time_s is not None:
            if args.total_time_s <= 0:
                raise JudgeInputError("--total-time-s must be positive")
            limits = limits.model_copy(
                update={"total_time_s": min(limits.total_time_s, args.total_time_s)}
            )
    except (JudgeInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results = run_judges(
        JudgeContext(inputs), args.out_dir, judges, votes, overrides, limits=limits
    )
    for j in results:
        state = {True: "FLAGGED", False: "clean", None: "undecided"}[j.flagged]
        print(f"judge {j.judge}: {state} ({j.decided_by}) {j.justification[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
