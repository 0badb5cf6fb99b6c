"""`ptb sweep`: benchmarks x models x agents x attempts as one resumable Harbor job;
`ptb sweep status DIR` for progress, cost and GPU-hours."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from posttrainbench.cli.options import (
    BaseImage,
    CacheVolume,
    Cpus,
    EvalLimit,
    Gpus,
    GpuType,
    Hours,
    MemoryGb,
    ModelFrom,
    check_cache_flags,
    compile_options,
)
from posttrainbench.errors import PtbError

app = typer.Typer(
    help="Run the benchmark x model x agent matrix as one resumable Harbor job.",
    invoke_without_command=True,
    no_args_is_help=True,
)

SWEEP_ENVS = ("local", "docker", "modal", "daytona", "condor")


def _ids(text: str, what: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise PtbError(f"--{what} names nothing")
    return items


@app.callback()
def sweep(
    ctx: typer.Context,
    benchmarks: str | None = typer.Option(
        None, "--benchmarks", "-b", help="Comma-separated benchmark ids."
    ),
    models: str | None = typer.Option(
        None, "--models", "-m", help="Comma-separated base model ids."
    ),
    agents: str | None = typer.Option(
        None,
        "--agents",
        "-a",
        help="AGENT[:MODEL],... e.g. claude-code:anthropic/claude-opus-4-1,codex:openai/gpt-5",
    ),
    env: str = typer.Option(
        "local", "--env", "-e", help=f"Where trials run: {', '.join(SWEEP_ENVS)}."
    ),
    attempts: int = typer.Option(1, "--attempts", "-k", help="Trials per (task, agent)."),
    concurrency: int = typer.Option(1, "--concurrency", "-n", help="Trials run at once."),
    hours: float = Hours,
    gpus: int | None = Gpus,
    cpus: int = Cpus,
    memory_gb: int = MemoryGb,
    base_image: str | None = BaseImage,
    gpu_type: str | None = GpuType,
    eval_limit: int | None = EvalLimit,
    retry: str = typer.Option(
        "errored",
        "--retry",
        help="On a resume: errored (run trials with an infra or verifier error again; "
        "the old ones move to retired/) or none. Completed, no-model and agent-error "
        "trials are the agent's result and are never run again.",
    ),
    out: Path | None = typer.Option(
        None,
        "-o",
        "--out",
        help="The sweep directory (default ./ptb-sweeps/<--name or a digest of the matrix>).",
    ),
    name: str | None = typer.Option(
        None, "--name", help="Name of the sweep directory under ./ptb-sweeps/."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Compile the tasks and write every file; print the command instead of running it.",
    ),
    auth: str = typer.Option(
        "auto", "--auth", help="auto, api-key or subscription (see `ptb run`)."
    ),
    secrets_dir: Path | None = typer.Option(
        None, "--secrets-dir", help="Subscription credential files."
    ),
    condor_requirements: str | None = typer.Option(
        None,
        "--condor-requirements",
        help="--env condor: a ClassAd requirements expression, e.g. "
        "'(CUDACapability >= 8.0)' or a GPU name pin.",
    ),
    reprompt_min_minutes: float | None = typer.Option(
        None,
        "--reprompt-min-minutes",
        help="Start an agent that stops early again (with a continuation "
        "prompt) while at least this many minutes of its time are left.",
    ),
    cache_volume: str | None = CacheVolume,
    model_from: str = ModelFrom,
    condor_env: str | None = typer.Option(
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

    from posttrainbench.credentials.resolve import AuthMode
    from posttrainbench.sweep.runner import SweepRequest, run_sweep
    from posttrainbench.sweep.spec import SweepSpec, parse_agents

    missing = [
        flag
        for flag, value in (
            ("--benchmarks", benchmarks),
            ("--models", models),
            ("--agents", agents),
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
    )
    try:
        spec = SweepSpec(
            benchmarks=_ids(benchmarks, "benchmarks"),
            models=_ids(models, "models"),
            agents=parse_agents(agents),
            env=env,
            attempts=attempts,
            concurrency=concurrency,
            retry=retry,
            cache_volume=cache_volume,
            reprompt_min_minutes=reprompt_min_minutes,
            options=options,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PtbError(
            f"invalid --{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
        ) from None
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
    from posttrainbench.sweep.condor import CONDOR_ENVS

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
    from posttrainbench.sweep.status import sweep_status

    status = sweep_status(sweep_dir)
    table = Table(
        title=f"sweep {sweep_dir.name}: {status.planned} trials planned, {status.retired} retried"
    )
    for column in (
        "agent",
        "scored",
        "no model",
        "errored",
        "to retry",
        "running",
        "pending",
        "cost $",
        "tokens in/out",
        "GPU-h",
        "agent h",
    ):
        table.add_column(
            column, justify="left" if column == "agent" else "right", no_wrap=column != "agent"
        )
    for a in status.agents:
        tokens = (
            "-"
            if a.input_tokens is None and a.output_tokens is None
            else f"{a.input_tokens or 0:,}/{a.output_tokens or 0:,}"
        )
        table.add_row(
            escape(a.agent),
            str(a.scored),
            str(a.no_model),
            str(a.errored),
            str(a.to_retry),
            str(a.running),
            str(a.pending),
            _fmt(a.cost_usd),
            tokens,
            _fmt(a.gpu_hours, 1),
            _fmt(a.agent_hours, 1),
        )
    console.print(table)
    for line in status.unreadable:
        Console(stderr=True).print(f"warning: {escape(line)}", highlight=False, soft_wrap=True)


@app.command("status")
def status_cmd(
    sweep_dir: Path = typer.Argument(..., help="A sweep directory."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Progress, LLM cost and GPU-hours of a sweep so far."""
    from posttrainbench.sweep.status import sweep_status

    if as_json:
        typer.echo(sweep_status(sweep_dir).model_dump_json(indent=2))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 140))
    _print_status(console, sweep_dir)
