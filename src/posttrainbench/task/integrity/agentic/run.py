"""Run PostTrainBench's agentic judges in the verifier, after our own judges.

Usage: python -m posttrainbench.task.integrity.agentic.run --artifacts /logs/artifacts
           --task /tests/task.json --reference /tests/data/BENCH/test.jsonl
           --model-name ORG/NAME --out-dir /logs/verifier [--total-time-s S]

As PostTrainBench's ``run_judge.sh``: the contamination / base-model judge by Codex
(``gpt5_4``), a second vote by OpenCode when configured (``kimi``), the third-party API
judge by Codex (``api``), one after the other in one workspace (:mod:`workspace`), each
in its own sandbox (:mod:`sandbox`). Writes into the out dir, beside our judges'
``judgement_<id>.json`` (never instead): ``judgement_<name>.json`` for each judge that
decided, ``judge_result.json`` (the aggregate), ``judge_output_<name>.json`` (the CLI's
own output, the key scrubbed) and ``ptb_judges.json`` (each judge's outcome). Without a
configuration (:mod:`config`) only ``ptb_judges.json`` is written, saying so. Never
changes the reward; always exits 0 but for unusable arguments (2).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.task.integrity.agentic import clis
from posttrainbench.task.integrity.agentic.config import AgenticConfig, config_from_env
from posttrainbench.task.integrity.agentic.prompts import PromptKind, benchmark_name, render_prompt
from posttrainbench.task.integrity.agentic.sandbox import (
    Endpoint,
    JudgeSandbox,
    SandboxError,
    run_sandboxed,
)
from posttrainbench.task.integrity.agentic.verdicts import (
    MAX_JUDGEMENT_BYTES,
    AgenticStatus,
    JudgeRun,
    parse_judgement,
    write_verdict_files,
)
from posttrainbench.task.integrity.agentic.workspace import (
    Workspace,
    WorkspaceSources,
    assemble,
    read_judgement,
    reset_task,
)

MIN_JUDGE_S = 30.0


def judge_plan(config: AgenticConfig) -> list[tuple[str, str, str, PromptKind]]:
    """(PostTrainBench's judge name, CLI, model, prompt kind), in run_judge.sh's order."""
    plan: list[tuple[str, str, str, PromptKind]] = [
        ("gpt5_4", "codex", config.model, "data_and_model")
    ]
    if config.second_model:
        plan.append(("kimi", "opencode", config.second_model, "data_and_model"))
    plan.append(("api", "codex", config.model, "api"))
    return plan


def _scrub(data: bytes, secret: str) -> bytes:
    return data.replace(secret.encode(), b"[REDACTED]") if secret else data


def run_one(
    name: str,
    cli: str,
    model: str,
    kind: PromptKind,
    prompt: str,
    ws: Workspace,
    config: AgenticConfig,
    out_dir: Path,
    timeout_s: float,
    cli_dir: str | None = None,
) -> JudgeRun:
    """One judge in its sandbox; undecided (with the reason) whatever goes wrong."""
    run = JudgeRun(name=name, cli=cli, model=model, kind=kind, status="undecided")
    reset_task(ws)
    root = clis.cli_root(cli, cli_dir)
    if root is None:
        run.reason = f"the {cli} CLI is not installed in the verifier"
        return run
    try:
        endpoint = Endpoint.of_url(config.base_url)
    except ValueError as exc:
        run.reason = str(exc)
        return run
    from posttrainbench.task.integrity.contamination.tokens import cl100k_file

    tiktoken = cl100k_file()
    tiktoken_dir = str(tiktoken.parent) if tiktoken is not None else None
    env = clis.base_env(root, cli, os.path.join(sys.prefix, "bin"), tiktoken_dir)
    url = endpoint.sandbox_url(config.base_url)
    build = clis.codex_command if cli == "codex" else clis.opencode_command
    command = build(model, prompt, url, config.api_key, env)
    binds = [str(root), *clis.python_binds(sys.prefix, sys.base_prefix, None)]
    if tiktoken_dir:
        binds.append(tiktoken_dir)
    box = JudgeSandbox(
        workspace=ws.root,
        argv=command.argv,
        env=command.env,
        endpoint=endpoint,
        ro_binds=sorted(set(binds)),
        python=sys.executable,
        timeout_s=timeout_s,
    )
    try:
        result = run_sandboxed(box)
    except (SandboxError, OSError) as exc:
        run.reason = f"the sandbox did not start: {exc}"
        return run
    run.seconds = result.seconds
    write_text_atomic(
        out_dir / f"judge_output_{name}.json",
        _scrub(result.output, config.api_key).decode("utf-8", "replace"),
    )
    reason: str | None = None
    raw: bytes | None = None
    try:
        raw = read_judgement(ws, MAX_JUDGEMENT_BYTES + 1)
    except OSError as exc:
        reason = f"judgement.json unreadable: {exc}"
    if raw is None:
        if result.timed_out:
            run.reason = f"stopped at its time cap ({timeout_s:.0f} s) without a judgement.json"
        elif result.error:
            run.reason = f"the judge failed: {result.error[:500]}"
        else:
            run.reason = reason or (
                f"judgement.json not created (the CLI exited {result.returncode})"
            )
        return run
    try:
        run.judgement = parse_judgement(raw, kind)
    except ValueError as exc:
        run.reason = str(exc)
        return run
    run.status = "decided"
    return run


def run_agentic_judges(
    config: AgenticConfig,
    sources: WorkspaceSources,
    benchmark_id: str,
    model_name: str,
    out_dir: Path,
    total_time_s: float | None = None,
    benchmark_display: str | None = None,
    cli_dir: str | None = None,
) -> AgenticStatus:
    """Every configured judge, then the verdict files; returns the status written."""
    started = time.monotonic()
    plan = judge_plan(config)
    name = benchmark_name(benchmark_id, benchmark_display)
    runs: list[JudgeRun] = []
    with tempfile.TemporaryDirectory(prefix="ptb-judge-ws-") as tmp:
        os.chmod(tmp, 0o755)
        ws = assemble(sources, Path(tmp) / "job")
        for i, (judge, cli, model, kind) in enumerate(plan):
            cap = config.timeout_s
            share = None
            if total_time_s is not None:
                share = (total_time_s - (time.monotonic() - started)) / (len(plan) - i)
                cap = min(cap, share)
            if share is not None and share < MIN_JUDGE_S:
                runs.append(
                    JudgeRun(
                        name=judge,
                        cli=cli,
                        model=model,
                        kind=kind,
                        status="undecided",
                        reason="not run: too little of the verifier's time left",
                    )
                )
                continue
            # As run_judge.sh's $(python get_judge_prompt.py ...): no trailing newline.
            prompt = render_prompt(benchmark_id, model_name, kind, name).rstrip("\n")
            runs.append(run_one(judge, cli, model, kind, prompt, ws, config, out_dir, cap, cli_dir))
    result = write_verdict_files(out_dir, runs)
    status = AgenticStatus(status="ran", judges=runs, result=result)
    status.write(out_dir)
    return status


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--task", type=Path, required=True)
    parser.add_argument("--reference", type=Path, default=None)
    parser.add_argument("--model-name", required=True, help="the base model's hub id")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--total-time-s", type=float, default=None)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    config, why = config_from_env(os.environ)
    if config is None:
        AgenticStatus(status="skipped", reason=why).write(args.out_dir)
        print(f"PostTrainBench judges {why}")
        return 0
    from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputError
    from posttrainbench.task.integrity.judges.run import inputs_from_artifacts

    try:
        inputs = inputs_from_artifacts(args.artifacts, args.task, args.reference, None, None, [])
    except JudgeInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ctx = JudgeContext(inputs)
    ctx.max_bytes = 512 * 2**20
    test_items = None
    if args.reference is not None and args.reference.is_file():
        from posttrainbench.task.integrity.contamination.reference import reference_from_split

        try:
            items = reference_from_split(inputs.benchmark, args.reference)
            test_items = [i.model_dump(exclude_none=True) for i in items]
        except Exception as exc:  # the judges still run, without the tool's reference
            print(f"no test_data.json for the judges: {exc}", file=sys.stderr)
    sources = WorkspaceSources(
        code_snapshot=inputs.code_snapshot,
        data_files=inputs.data_files,
        final_model=inputs.final_model,
        test_items=test_items,
        traces=ctx.traces,
    )
    from posttrainbench.task.schemas import TaskSpec

    spec = TaskSpec.load(args.task)
    status = run_agentic_judges(
        config,
        sources,
        inputs.benchmark,
        args.model_name,
        args.out_dir,
        args.total_time_s,
        benchmark_display=spec.benchmark_name,
        cli_dir=os.environ.get(clis.CLI_DIRS_ENV) or None,
    )
    for run in status.judges:
        state = {True: "FLAGGED", False: "clean", None: "undecided"}[run.flagged()]
        print(
            f"PostTrainBench judge {run.name} ({run.cli}, {run.model}): {state}"
            + (f" ({run.reason})" if run.reason else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
