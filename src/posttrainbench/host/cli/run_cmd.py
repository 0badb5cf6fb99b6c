"""`ptb run`: compile one task and run it through Harbor."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.json_output import stdout_to_stderr
from posttrainbench.host.cli.options import (
    Agent,
    AgentEnv,
    AgentKwargs,
    AgentModel,
    AuthName,
    AuthOpt,
    BaseImage,
    BaseModelId,
    Benchmark,
    CacheVolume,
    Cpus,
    DryRun,
    EnvironmentKwargs,
    EnvName,
    EvalBudget,
    EvalLimit,
    Feedback,
    FeedbackName,
    Gpus,
    GpuType,
    Hours,
    JobName,
    Json,
    MaxRetries,
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
    key_values,
    runs_dir_option,
)

# Kept in sync with runner.environments.ENV_NAMES (imported lazily: Harbor is slow to import).
ENV_NAMES = ("local", "docker", "modal", "daytona")


def run(
    benchmark: str = Benchmark,
    model: str = BaseModelId,
    agent: str = Agent,
    agent_model: str | None = AgentModel,
    env: EnvName = typer.Option("local", "-e", "--env", help="Where trials run."),
    hours: float = Hours,
    gpus: int | None = Gpus,
    cpus: int = Cpus,
    memory_gb: int = MemoryGb,
    base_image: str | None = BaseImage,
    gpu_type: str | None = GpuType,
    model_from: ModelSource = ModelFrom,
    cache_volume: str | None = CacheVolume,
    eval_limit: int | None = EvalLimit,
    variant: VariantName | None = Variant,
    feedback: FeedbackName = Feedback,
    eval_budget: int | None = EvalBudget,
    n_concurrent: int = NConcurrent,
    attempts: int = NAttempts,
    runs_dir: Path = runs_dir_option(Path("ptb-runs"), "Where runs are written (<DIR>/<run id>/)."),
    auth: AuthName = AuthOpt,
    secrets_dir: Path | None = SecretsDir,
    reprompt_min_minutes: float | None = RepromptMinMinutes,
    credentials: str | None = typer.Option(
        None,
        "--credentials",
        metavar="PROFILE",
        help="Credential profile for a custom module:Class agent: claude-code, codex, gemini-cli or opencode.",
    ),
    agent_kwargs: list[str] = AgentKwargs,
    agent_env: list[str] = AgentEnv,
    environment_kwargs: list[str] = EnvironmentKwargs,
    max_retries: int = MaxRetries,
    job_name: str | None = JobName,
    dry_run: bool = DryRun,
    as_json: bool = Json,
) -> None:
    """Run an agent on one (benchmark, base model) task through Harbor's Job API.

    Example: ptb run -b gsm8k -M qwen3-1.7b -a claude-code -m anthropic/claude-opus-4-1 -e modal
    """
    from posttrainbench.host.cli.summary import print_trials
    from posttrainbench.host.credentials.resolve import AuthMode
    from posttrainbench.host.runner.job_runner import RunRequest
    from posttrainbench.host.runner.job_runner import run as run_job

    if env not in ENV_NAMES:
        raise PtbError(f"unknown environment {env!r}; choose one of: {', '.join(ENV_NAMES)}")
    if n_concurrent < 1 or attempts < 1:
        raise PtbError("-n/--n-concurrent and -k/--n-attempts must be at least 1")
    if auth not in {mode.value for mode in AuthMode}:
        raise PtbError(
            f"unknown --auth {auth!r}; choose one of: {', '.join(mode.value for mode in AuthMode)}"
        )
    check_cache_flags(env, model_from, cache_volume)
    if reprompt_min_minutes is not None and reprompt_min_minutes <= 0:
        raise PtbError(
            f"invalid --reprompt-min-minutes {reprompt_min_minutes:g}: must be more than 0"
        )
    from harbor.cli.utils import parse_kwargs

    try:  # Harbor's own parsing of --ak/--ek values (JSON or Python literals, else strings)
        harbor_kwargs = parse_kwargs(agent_kwargs), parse_kwargs(environment_kwargs)
    except ValueError as exc:
        raise PtbError(f"invalid --ak/--ek: {exc}") from None
    request = RunRequest(
        benchmark=benchmark,
        run_id=job_name,
        agent_kwargs=harbor_kwargs[0],
        agent_env=key_values(agent_env, "--ae"),
        environment_kwargs=harbor_kwargs[1],
        max_retries=max_retries,
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
            variant=variant,
            feedback=feedback,
            agent_eval_budget=eval_budget,
        ),
    )
    if dry_run:
        from posttrainbench.host.runner.job_runner import dry_run as plan

        with stdout_to_stderr(as_json):
            config = plan(request)
        if as_json:
            typer.echo(config.read_text(encoding="utf-8"))
            return
        Console().print(
            f"dry run: the task is compiled and the Harbor job config written; nothing ran.\n"
            f"run it with: harbor run -c {escape(str(config))}",
            highlight=False,
            soft_wrap=True,
        )
        return
    with stdout_to_stderr(as_json):
        record = run_job(request)
    if as_json:
        typer.echo(record.model_dump_json(indent=2))
        return
    print_trials(Console(), record)
    Console().print(
        f"browse its trials: harbor view {escape(str(Path(record.job_dir).parent))}",
        highlight=False,
        soft_wrap=True,
    )
