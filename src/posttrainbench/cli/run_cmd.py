"""`ptb run`: compile one task and run it through Harbor."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from posttrainbench.cli.options import (
    BaseImage,
    Benchmark,
    CacheVolume,
    Cpus,
    EvalBudget,
    EvalLimit,
    Feedback,
    Gpus,
    GpuType,
    Hours,
    MemoryGb,
    Model,
    ModelFrom,
    check_cache_flags,
    compile_options,
)
from posttrainbench.errors import PtbError

# Kept in sync with runner.environments.ENV_NAMES (imported lazily: Harbor is slow to import).
ENV_NAMES = ("local", "docker", "modal", "daytona")


def run(
    benchmark: str = Benchmark,
    model: str = Model,
    agent: str = typer.Option(
        ...,
        "--agent",
        "-a",
        help="Harbor agent name (oracle, claude-code, codex, ...) or module:Class.",
    ),
    agent_model: str | None = typer.Option(
        None, "--agent-model", help="Model the agent uses, e.g. anthropic/claude-opus-4-1."
    ),
    env: str = typer.Option(
        "local", "--env", "-e", help=f"Where trials run: {', '.join(ENV_NAMES)}."
    ),
    hours: float = Hours,
    gpus: int | None = Gpus,
    cpus: int = Cpus,
    memory_gb: int = MemoryGb,
    base_image: str | None = BaseImage,
    gpu_type: str | None = GpuType,
    model_from: str = ModelFrom,
    cache_volume: str | None = CacheVolume,
    eval_limit: int | None = EvalLimit,
    feedback: str = Feedback,
    eval_budget: int | None = EvalBudget,
    n_concurrent: int = typer.Option(1, "-n", "--n-concurrent", help="Trials run at once."),
    attempts: int = typer.Option(1, "--attempts", "-k", help="Trials per task."),
    runs_dir: Path = typer.Option(Path("ptb-runs"), "--runs-dir", help="Where runs are written."),
    auth: str = typer.Option(
        "auto",
        "--auth",
        help="How the agent authenticates: auto (a subscription credential if its file exists, "
        "else an API key), api-key or subscription.",
    ),
    secrets_dir: Path | None = typer.Option(
        None,
        "--secrets-dir",
        help="Directory of subscription credential files, outside the repository "
        "(default $PTB_SECRETS_DIR, else ~/.config/posttrainbench/secrets).",
    ),
    reprompt_min_minutes: float | None = typer.Option(
        None,
        "--reprompt-min-minutes",
        help="Start an agent that stops early again (with a continuation "
        "prompt) while at least this many minutes of its time are left.",
    ),
    credentials: str | None = typer.Option(
        None,
        "--credentials",
        help="Credential profile for a custom module:Class agent: claude-code, codex, gemini-cli or opencode.",
    ),
) -> None:
    """Run an agent on one (benchmark, model) task through Harbor's Job API."""
    from posttrainbench.cli.summary import print_trials
    from posttrainbench.credentials.resolve import AuthMode
    from posttrainbench.runner.job_runner import RunRequest
    from posttrainbench.runner.job_runner import run as run_job

    if env not in ENV_NAMES:
        raise PtbError(f"unknown environment {env!r}; choose one of: {', '.join(ENV_NAMES)}")
    if n_concurrent < 1 or attempts < 1:
        raise PtbError("-n and --attempts must be at least 1")
    if auth not in {mode.value for mode in AuthMode}:
        raise PtbError(
            f"unknown --auth {auth!r}; choose one of: {', '.join(mode.value for mode in AuthMode)}"
        )
    check_cache_flags(env, model_from, cache_volume)
    if reprompt_min_minutes is not None and reprompt_min_minutes <= 0:
        raise PtbError(
            f"invalid --reprompt-min-minutes {reprompt_min_minutes:g}: must be more than 0"
        )
    request = RunRequest(
        benchmark=benchmark,
        model=model,
        agent=agent,
        agent_model=agent_model,
        env=env,
        n_concurrent=n_concurrent,
        attempts=attempts,
        runs_dir=runs_dir,
        auth=AuthMode(auth),
        secrets_dir=secrets_dir,
        credential_profile=credentials,
        reprompt_min_minutes=reprompt_min_minutes,
        cache_volume=cache_volume,
        options=compile_options(
            hours=hours,
            gpus=gpus,
            cpus=cpus,
            memory_gb=memory_gb,
            base_image=base_image,
            gpu_type=gpu_type,
            model_from=model_from,
            final_eval_limit=eval_limit,
            feedback=feedback,
            agent_eval_budget=eval_budget,
        ),
    )
    record = run_job(request)
    print_trials(Console(), record)
