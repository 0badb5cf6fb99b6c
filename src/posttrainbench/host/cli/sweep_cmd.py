"""`ptb sweep`: benchmarks x models x agents x attempts as one resumable Harbor job;
`ptb sweep status DIR` for progress, cost and GPU-hours."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.options import (
    AuthName,
    AuthOpt,
    BaseImage,
    BaseModelIds,
    Benchmarks,
    CacheVolume,
    Cpus,
    EvalLimit,
    Gpus,
    GpuType,
    Hours,
    Json,
    MemoryGb,
    ModelFrom,
    ModelSource,
    NAttempts,
    NConcurrent,
    RepromptMinMinutes,
    SecretsDir,
    Variant,
    VariantName,
    check_cache_flags,
    compile_options,
    not_a_base_model,
    out_option,
)
from posttrainbench.host.sweep.condor import CondorEnv
from posttrainbench.host.sweep.spec import LEGACY_RETRY_NAMES, AgentChoice, RetryPolicy, SweepEnv

# The CLI also takes "errored", the old name of "infra" (sweep.spec.LEGACY_RETRY_NAMES).
RetryChoice = Literal["infra", "none", "errored"]

if TYPE_CHECKING:
    from posttrainbench.host.sweep.status import SweepStatus

app = typer.Typer(
    help="Run the benchmark x model x agent matrix as one resumable Harbor job "
    "(`ptb sweep status DIR` shows its progress).\n\n"
    "Example: ptb sweep -b gsm8k,bfcl -M qwen3-1.7b -a claude-code:anthropic/claude-opus-4-1 "
    "-e modal -n 4",
    invoke_without_command=True,
    no_args_is_help=True,
)

SWEEP_ENVS = ("local", "docker", "modal", "daytona", "condor")


def _with_model(choices: list[AgentChoice], model: str | None) -> list[AgentChoice]:
    """`-m MODEL`, as in `harbor run`: the model of each agent that names none of its own."""
    if model is None:
        return choices
    return [c if c.model else c.model_copy(update={"model": model}) for c in choices]


def _ids(text: str, what: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise PtbError(f"--{what} names nothing")
    return items


@app.callback()
def sweep(
    ctx: typer.Context,
    benchmarks: list[str] = Benchmarks,
    models: list[str] = BaseModelIds,
    agents: list[str] = typer.Option(
        [],
        "-a",
        "--agent",
        metavar="AGENT[:MODEL]",
        show_default=False,
        help="Harbor agent, with the model it uses after a colon; repeatable, or "
        "comma-separated, e.g. claude-code:anthropic/claude-opus-4-1,codex:openai/gpt-5",
    ),
    agent_model: str | None = typer.Option(
        None,
        "-m",
        "--model",
        metavar="MODEL",
        callback=not_a_base_model,
        help="The model of every agent given without its own :MODEL, as in `harbor run`.",
    ),
    env: SweepEnv = typer.Option("local", "-e", "--env", help="Where trials run."),
    attempts: int = NAttempts,
    concurrency: int = NConcurrent,
    hours: float = Hours,
    gpus: int | None = Gpus,
    cpus: int = Cpus,
    memory_gb: int = MemoryGb,
    base_image: str | None = BaseImage,
    gpu_type: str | None = GpuType,
    eval_limit: int | None = EvalLimit,
    variant: VariantName | None = Variant,
    retry: RetryChoice = typer.Option(
        "infra",
        "--retry",
        help="On a resume: infra (run trials with an infrastructure or verifier error "
        "again; the old ones move to retired/; 'errored' is its old name) or none. "
        "Completed, no-model and agent-error trials are the agent's result and are never "
        "run again.",
    ),
    out: Path | None = out_option(
        None, "The sweep directory (default ./ptb-sweeps/<--name or a digest of the matrix>)."
    ),
    name: str | None = typer.Option(
        None, "--name", metavar="NAME", help="Name of the sweep directory under ./ptb-sweeps/."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Compile the tasks and write every file; print the command instead of running it.",
    ),
    auth: AuthName = AuthOpt,
    secrets_dir: Path | None = SecretsDir,
    condor_requirements: str | None = typer.Option(
        None,
        "--condor-requirements",
        help="--env condor: a ClassAd requirements expression, e.g. "
        "'(CUDACapability >= 8.0)' or a GPU name pin.",
    ),
    reprompt_min_minutes: float | None = RepromptMinMinutes,
    cache_volume: str | None = CacheVolume,
    model_from: ModelSource = ModelFrom,
    condor_env: CondorEnv | None = typer.Option(
        None,
        "--condor-env",
        help="--env condor: Harbor's environment on the execute node: docker (default) "
        "or singularity (needs a prebuilt image in task.toml).",
    ),
) -> None:
    """Run (or resume: the same command again) a sweep; finished trials are never run twice."""
    if ctx.invoked_subcommand is not None:
        return
    from pydantic import ValidationError

    from posttrainbench.host.credentials.resolve import AuthMode
    from posttrainbench.host.sweep.runner import SweepRequest, run_sweep
    from posttrainbench.host.sweep.spec import SweepSpec, parse_agents

    missing = [
        flag
        for flag, value in (
            ("-b/--benchmark", benchmarks),
            ("-M/--base-model", models),
            ("-a/--agent", agents),
        )
        if not value
    ]
    if missing:
        raise PtbError(f"ptb sweep needs {', '.join(missing)}")
    if env not in SWEEP_ENVS:
        raise PtbError(f"unknown --env {env!r}; choose one of: {', '.join(SWEEP_ENVS)}")
    _check_condor_flags(env, condor_requirements, condor_env)
    check_cache_flags(env, model_from, cache_volume)
    if auth not in {mode.value for mode in AuthMode}:
        raise PtbError(
            f"unknown --auth {auth!r}; choose one of: {', '.join(mode.value for mode in AuthMode)}"
        )
    options = compile_options(
        hours=hours,
        gpus=gpus,
        cpus=cpus,
        memory_gb=memory_gb,
        base_image=base_image,
        gpu_type=gpu_type,
        model_from=model_from,
        final_eval_limit=eval_limit,
        variant=variant,
    )
    try:
        spec = SweepSpec(
            benchmarks=_ids(",".join(benchmarks), "benchmark"),
            models=_ids(",".join(models), "base-model"),
            agents=_with_model(parse_agents(",".join(agents)), agent_model),
            env=env,
            attempts=attempts,
            concurrency=concurrency,
            retry=cast(RetryPolicy, LEGACY_RETRY_NAMES.get(retry, retry)),
            cache_volume=cache_volume,
            reprompt_min_minutes=reprompt_min_minutes,
            options=options,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PtbError(
            f"invalid --{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
        ) from None
    # The argv that started this sweep is what `ptb sweep status` offers to resume it.
    command = ["ptb", *sys.argv[1:]] if Path(sys.argv[0]).name == "ptb" else None
    outcome = run_sweep(
        SweepRequest(
            spec=spec,
            out=out,
            name=name,
            dry_run=dry_run,
            auth=AuthMode(auth),
            secrets_dir=secrets_dir,
            condor_requirements=condor_requirements,
            condor_env=condor_env or "docker",
            command=command,
        )
    )
    console = Console()
    console.print(
        f"sweep directory: {escape(str(outcome.sweep_dir))} ({spec.n_trials} trials planned)",
        highlight=False,
        soft_wrap=True,
    )
    if outcome.note:
        console.print(escape(outcome.note), highlight=False, soft_wrap=True)
    for line in outcome.commands:
        prefix = "  " if outcome.note else "would run: "
        console.print(f"{prefix}{escape(line)}", highlight=False, soft_wrap=True)
    if outcome.submitted or outcome.skipped:
        console.print(
            f"submitted {len(outcome.submitted)} condor job(s), {len(outcome.skipped)} not again "
            f"(finished, or submitted before); logs in "
            f"{escape(str(outcome.sweep_dir / 'condor' / 'logs'))}",
            highlight=False,
            soft_wrap=True,
        )
    for line in outcome.warnings:
        Console(stderr=True).print(f"warning: {escape(line)}", highlight=False, soft_wrap=True)
    if outcome.retired:
        console.print(
            f"{len(outcome.retired)} errored trial(s) run again (infra or verifier errors; "
            "old ones in retired/)",
            highlight=False,
        )
    if outcome.ran:
        _print_status(console, outcome.sweep_dir)


def _check_condor_flags(env: str, requirements: str | None, condor_env: str | None) -> None:
    from posttrainbench.host.sweep.condor import CONDOR_ENVS

    if condor_env is not None and condor_env not in CONDOR_ENVS:
        raise PtbError(
            f"unknown --condor-env {condor_env!r}; choose one of: {', '.join(CONDOR_ENVS)}"
        )
    given = [
        flag
        for flag, value in (("--condor-requirements", requirements), ("--condor-env", condor_env))
        if value is not None
    ]
    if given and env != "condor":
        raise PtbError(f"{' and '.join(given)}: only with --env condor")


def _fmt(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _print_status(console: Console, sweep_dir: Path) -> None:
    from posttrainbench.host.sweep.status import sweep_status

    status = sweep_status(sweep_dir)
    stopped = status.runner == "stopped"
    # Light borders, one space between columns and two-line headers: the numbers keep
    # their width at 80 columns (a COLUMNS=80 terminal), the agent column shrinks.
    table = Table(
        title=f"sweep {sweep_dir.name}: {status.planned} trials planned, {status.retired} retried",
        box=box.SIMPLE_HEAD,
        padding=(0, 0, 0, 1),
        pad_edge=False,
    )
    headers = [
        "agent",
        "scored",
        "no\nmodel",
        "errored\n(retry)",
        "stopped" if stopped else "running",
        "pending",
        "cost\n$",
        "tokens\nin/out",
        "GPU\nhours",
        "agent\nhours",
    ]
    for column in headers:
        agent = column == "agent"
        table.add_column(
            column,
            justify="left" if agent else "right",
            no_wrap=not agent,
            overflow="fold",
            ratio=1 if agent else None,
        )
    # The numbers take about 70 columns; where the longest label does not fit beside them
    # (an 80-column terminal), the rows name agents by number and a legend follows.
    numbered = console.width < 72 + max((len(a.agent) for a in status.agents), default=0)
    for n, a in enumerate(status.agents, 1):
        tokens = (
            "-"
            if a.input_tokens is None and a.output_tokens is None
            else f"{_short(a.input_tokens or 0)}/{_short(a.output_tokens or 0)}"
        )
        table.add_row(
            f"#{n}" if numbered else escape(a.agent),
            str(a.scored),
            str(a.no_model),
            f"{a.errored} ({a.to_retry})" if a.to_retry else str(a.errored),
            str(a.interrupted if stopped else a.running),
            str(a.pending),
            _fmt(a.cost_usd),
            tokens,
            _fmt(a.gpu_hours, 1),
            _fmt(a.agent_hours, 1),
        )
    console.print(table)
    if numbered:
        for n, a in enumerate(status.agents, 1):
            console.print(f" #{n}  {escape(a.agent)}", highlight=False, soft_wrap=True)
    _print_runner(console, status)
    for line in status.unreadable:
        Console(stderr=True).print(f"warning: {escape(line)}", highlight=False, soft_wrap=True)


def _short(count: int) -> str:
    """A token count in at most five characters (12k, 3.4M): keeps the column narrow."""
    for size, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if count >= size:
            value = count / size
            return f"{value:.1f}{suffix}" if value < 10 else f"{value:.0f}{suffix}"
    return str(count)


def _print_runner(console: Console, status: SweepStatus) -> None:
    """One line on the runner: at work, or gone, and then the exact command that resumes."""
    pid = f" (pid {status.runner_pid})" if status.runner_pid else ""
    if status.runner == "running":
        console.print(f"runner: running{pid}", highlight=False)
    elif status.resume_command:
        interrupted = sum(a.interrupted for a in status.agents)
        what = f"{interrupted} trial(s) were interrupted; " if interrupted else ""
        console.print(
            f"runner: not running{pid}; {what}resume with: {escape(status.resume_command)}",
            highlight=False,
            soft_wrap=True,
        )


@app.command("status")
def status_cmd(
    sweep_dir: Path = typer.Argument(..., help="A sweep directory (from `ptb sweep`)."),
    as_json: bool = Json,
) -> None:
    """Progress, LLM cost and GPU-hours of a sweep so far.

    Example: ptb sweep status ptb-sweeps/my-sweep
    """
    from posttrainbench.host.sweep.status import sweep_status

    if as_json:
        typer.echo(sweep_status(sweep_dir).model_dump_json(indent=2))
        return
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        # Piped into a log or a pager: one line per agent. A COLUMNS the user set wins.
        console = Console(width=max(console.width, 140))
    _print_status(console, sweep_dir)
