"""Compile a task and run it through Harbor's Job API (never a re-implementation)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from harbor.job import Job
from harbor.models.job.config import JobConfig, RetryConfig
from harbor.models.trial.config import AgentConfig, TaskConfig
from harbor.models.trial.result import TrialResult
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

import posttrainbench
from posttrainbench.core.errors import RunError
from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.core.trial_outcome import INFRA_EXCEPTIONS, VERIFIER_EXCEPTIONS, classify
from posttrainbench.host.agents.clis import is_agent_cli
from posttrainbench.host.credentials.resolve import AuthMode
from posttrainbench.host.credentials.scrub import Scrubber
from posttrainbench.host.runner.environments import harbor_environment, local_resources
from posttrainbench.host.runner.preflight import (
    check_agent,
    check_agent_cli_tools,
    check_cloud_login,
    check_credentials,
    check_ids,
    check_judge,
    check_local_sandbox,
)
from posttrainbench.host.runner.record import RunRecord, TrialRecord, run_status
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.gpu_image import agent_cli_version
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.integrity.agentic.config import MODEL_ENV as AGENTIC_MODEL_ENV

LOCAL_ENVS = ("local", "docker")
METRICS_FILE = "verifier/metrics.json"
MAX_METRICS_BYTES = 64 * 2**20


class RunRequest(BaseModel):
    """What `ptb run` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    model: str
    agent: str = "oracle"
    agent_model: str | None = None
    env: str = "local"
    n_concurrent: int = Field(default=1, ge=1)
    attempts: int = Field(default=1, ge=1)
    runs_dir: Path = Path("ptb-runs")
    run_id: str | None = None
    options: CompileOptions = Field(default_factory=CompileOptions)
    quiet: bool = False
    command: str = "run"
    auth: AuthMode = AuthMode.AUTO
    secrets_dir: Path | None = None
    cache_volume: str | None = Field(
        default=None, description="modal/daytona: shared read-only cache volume"
    )
    reprompt_min_minutes: float | None = Field(
        default=None,
        gt=0,
        description="Re-prompt an agent that stops "
        "with at least this many minutes left (None: never)",
    )
    credential_profile: str | None = Field(
        default=None, description="Whose credentials a custom module:Class agent gets (e.g. codex)"
    )
    # Harbor's own `harbor run` flags, passed through (--ak, --ae, --ek, --max-retries).
    agent_kwargs: dict[str, Any] = Field(default_factory=dict)
    agent_env: dict[str, str] = Field(default_factory=dict)
    environment_kwargs: dict[str, Any] = Field(default_factory=dict)
    max_retries: int = Field(
        default=0, ge=0, description="retries of infra and verifier errors only (RETRIED_KINDS)"
    )


def agent_config(
    agent: str,
    agent_model: str | None,
    env: dict[str, str] | None = None,
    *,
    key_vars: list[str] | None = None,
    reprompt_min_minutes: float | None = None,
) -> AgentConfig:
    """Harbor's AgentConfig for an agent name or `module:Class`, with extra environment,
    the agent CLI's pinned version, and optionally the re-prompting wrapper around it."""
    # `env` reaches the agent as its extra_env; Harbor writes sensitive values back to
    # config.json only as ${VAR} templates or masked.
    from posttrainbench.host.agents.agent_config import build_agent_config
    from posttrainbench.host.credentials.resolve import spec_for

    if key_vars is None:  # the variables the credential overlay gives, else the agent's usual ones
        key_vars = list(env or {}) or (
            list(spec_for(agent, agent_model).api_key_vars) if ":" not in agent else []
        )
    config = build_agent_config(
        agent, agent_model, env, key_vars=key_vars, reprompt_min_minutes=reprompt_min_minutes
    )
    version = agent_cli_version(agent)
    if version is not None:  # the version the GPU image preinstalls: Harbor then skips the install
        config.kwargs.setdefault("version", version)
    return config


def _trial_record(result: TrialResult) -> TrialRecord:
    trial_dir = Path(result.trial_uri.removeprefix("file://"))
    metrics = trial_dir / METRICS_FILE
    outcome = classify(result, _metrics(trial_dir))
    return TrialRecord(
        trial_name=result.trial_name,
        trial_dir=str(trial_dir),
        outcome=outcome.kind,
        reward=outcome.reward,
        error=None if outcome.kind == "completed" else outcome.reason,
        metrics_path=str(metrics) if metrics.exists() else None,
    )


def _metrics(trial_dir: Path) -> dict[str, str] | None:
    """What the verifier's metrics.json says went wrong (its `error` and `failure`); None
    when it wrote none or it cannot be read (the trial's outcome then rests on Harbor's
    result alone). Read leniently, not as the full Metrics schema: a file from another
    version must still explain a missing model, not leave its row without a reason. The
    agent could write below verifier/, so no link is followed and no special file opened
    (safe_fs), and only string values are taken."""
    try:
        with SafeDir.open(trial_dir) as root:
            if root.lstat(METRICS_FILE) is None:
                return None
            data = json.loads(root.read_bytes(METRICS_FILE, MAX_METRICS_BYTES))
    except (OSError, ValueError):  # nofollow.Refused is an OSError
        return None
    if not isinstance(data, dict):
        return None
    return {k: data[k] for k in ("error", "failure") if isinstance(data.get(k), str)}


def job_config(
    request: RunRequest,
    task_dir: Path,
    jobs_dir: Path,
    run_id: str,
    agent_env: dict[str, str] | None = None,
) -> JobConfig:
    """The Harbor job for this request: one task, one agent, K attempts."""
    cpus = memory_mb = None
    if request.env in LOCAL_ENVS:
        # Cap the cloud-sized request at what this machine has.
        host_cpus, host_mb = local_resources()
        cpus = min(request.options.cpus, host_cpus)
        memory_mb = min(request.options.memory_gb * 1024, host_mb)
    agent = agent_config(
        request.agent,
        request.agent_model,
        {**(agent_env or {}), **request.agent_env} or None,
        reprompt_min_minutes=request.reprompt_min_minutes,
    )
    agent.kwargs.update(request.agent_kwargs)
    environment = harbor_environment(
        request.env,
        cpus=cpus,
        memory_mb=memory_mb,
        cache_volume=request.cache_volume,
        # PostTrainBench's agentic judges run the CLIs in the verifier (integrity.agentic)
        agent_clis=is_agent_cli(request.agent) or bool(os.environ.get(AGENTIC_MODEL_ENV)),
    )
    environment.kwargs.update(request.environment_kwargs)
    return JobConfig(
        job_name=run_id,
        jobs_dir=jobs_dir,
        n_attempts=request.attempts,
        n_concurrent_trials=request.n_concurrent,
        quiet=request.quiet,
        # Only what is not the agent's own result is retried: a retried agent error
        # would be an extra attempt (trial_outcome.RETRIED_KINDS).
        retry=RetryConfig(
            max_retries=request.max_retries,
            include_exceptions=set(INFRA_EXCEPTIONS | VERIFIER_EXCEPTIONS),
        ),
        agents=[agent],
        environment=environment,
        tasks=[TaskConfig(path=task_dir)],
    )


def job_dir_of(runs_dir: Path, run_id: str) -> Path:
    """Where Harbor writes the job of run *run_id* (its trials are the directories in it)."""
    return runs_dir.resolve() / run_id / "jobs" / run_id


def _run_id(request: RunRequest, started: datetime) -> str:
    return request.run_id or (
        f"{request.benchmark}-{request.model}-{request.agent.replace(':', '.')}-"
        f"{started:%Y%m%d-%H%M%S}"
    )


DRY_RUN_CONFIG = "job.json"


def dry_run(request: RunRequest) -> Path:
    """`--dry-run`: check the ids, compile the task and write the Harbor job config
    (``<run dir>/job.json``, no credentials in it) that a run would use; run nothing."""
    run_id = _run_id(request, datetime.now())
    run_dir = request.runs_dir.resolve() / run_id
    check_ids(request.benchmark, request.model)
    check_agent(request.agent)
    task_dir = compile_task(request.benchmark, request.model, run_dir / "tasks", request.options)
    config = job_config(request, task_dir, run_dir / "jobs", run_id)
    path = run_dir / DRY_RUN_CONFIG
    path.write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


async def execute(request: RunRequest) -> RunRecord:
    """Compile the task, run the Harbor job, and keep the run record up to date."""
    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    started = datetime.now()
    run_id = _run_id(request, started)
    run_dir = request.runs_dir.resolve() / run_id
    # Before anything is compiled, built or billed: a misspelt id or agent, a missing
    # secret or login stops here, and nothing is written.
    check_ids(request.benchmark, request.model)
    check_agent(request.agent)
    if request.reprompt_min_minutes is not None:
        from posttrainbench.host.agents.reprompt import inner_agent_class

        inner_agent_class(request.agent)
    credentials = check_credentials(
        request.agent,
        request.agent_model,
        runs_dir=request.runs_dir,
        profile=request.credential_profile,
        auth=request.auth,
        secrets_dir=request.secrets_dir,
    )
    check_judge(request.benchmark)
    check_cloud_login(request.env)
    if request.env == "local":
        check_local_sandbox()
        check_agent_cli_tools(request.agent)
    if credentials.message:
        Console(stderr=True).print(
            credentials.message, highlight=False, markup=False, soft_wrap=True
        )
    scrubber = Scrubber.for_run(os.environ, credentials.secret_values)
    fresh = not run_dir.exists()
    try:
        task_dir = compile_task(
            request.benchmark, request.model, run_dir / "tasks", request.options
        )
    except BaseException:
        if fresh:  # a run that never started leaves no directory behind
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    jobs_dir = run_dir / "jobs"
    record = RunRecord(
        run_id=run_id,
        command=request.command,
        benchmark=request.benchmark,
        model=request.model,
        agent=request.agent,
        agent_model=request.agent_model,
        environment=request.env,
        hours=request.options.hours,
        attempts=request.attempts,
        task_dir=str(task_dir),
        job_dir=str(job_dir_of(request.runs_dir, run_id)),
        harbor_version=version("harbor"),
        posttrainbench_version=posttrainbench.__version__,
        started_at=started,
        credentials=credentials.summary,
    )
    record_path = record.path
    record.write(record_path)
    try:
        if request.env == "local":
            from posttrainbench.host.runner.prebuild import (
                prebuild_agent_clis,
                prebuild_local_environment,
            )

            prebuild_local_environment(task_dir, Console(stderr=request.quiet))
            if is_agent_cli(request.agent) or os.environ.get(AGENTIC_MODEL_ENV):
                prebuild_agent_clis(task_dir, Console(stderr=request.quiet))
        job = await Job.create(
            job_config(request, task_dir, jobs_dir, run_id, credentials.agent_env)
        )
        result = await job.run()
    except BaseException as exc:
        # Keep the record truthful whatever stopped the run (error, Ctrl-C), and scrub.
        record.status = "failed"
        record.finished_at = datetime.now()
        record = _scrub_run(run_dir, record, scrubber)
        record.write(record_path)
        if isinstance(exc, (ValueError, FileNotFoundError)):
            message = scrubber.scrub_text(
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            )
            raise RunError(f"harbor could not run the job: {message}") from exc
        raise
    record.trials = [_trial_record(t) for t in result.trial_results]
    record.status = run_status([t.outcome for t in record.trials if t.outcome])
    record.finished_at = datetime.now()
    record = _scrub_run(run_dir, record, scrubber)
    record.write(record_path)
    return record


def _scrub_run(run_dir: Path, record: RunRecord, scrubber: Scrubber) -> RunRecord:
    """Scrub everything the job wrote (trial dirs, logs, trajectories, config.json files,
    the code snapshot) in place, then return the record itself scrubbed, with the counts.

    The compiled task dir is input, written before the agent ran and holding no secret;
    it is left byte-identical (its sealed test data must not change).
    """
    report = scrubber.scrub_tree(run_dir, exclude=[Path(record.task_dir).parent, record.path])
    # Trial errors come from Harbor's in-memory results, which may quote a secret too.
    clean = RunRecord.model_validate(scrubber.scrub_json_value(record.model_dump(mode="json")))
    clean.scrub = report
    if report.failures:
        Console(stderr=True).print(
            f"warning: {len(report.failures)} file(s) could not be scrubbed; see scrub.failures in run.json",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    return clean


def run(request: RunRequest) -> RunRecord:
    """Synchronous wrapper of `execute` for the CLI."""
    return asyncio.run(execute(request))
