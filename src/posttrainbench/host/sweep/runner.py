"""Run a sweep (or resume it): one Harbor job, a lock against a second runner, and a stated
retry policy for failed trials.

Harbor resumes a job whose directory already exists with the same config: finished
trials are kept, a trial directory without `result.json` (a run that was killed) is
started again. Two runners on one sweep would start duplicates of running trials, so a
lock on the sweep directory refuses the second one. With `--retry infra`, trials whose
outcome is an infra_error or verifier_error (posttrainbench.core.trial_outcome.RETRIED_KINDS,
unfinished ones included) are moved to `retired/` first, so Harbor plans them again;
completed, no_model and agent_error trials are the agent's result and are kept.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.host.agents.clis import is_agent_cli
from posttrainbench.host.credentials.resolve import AuthMode
from posttrainbench.host.envs.instance_fs import release_stale_mounts
from posttrainbench.host.sweep.condor import (
    CondorEnv,
    CondorSettings,
    check_condor_credentials,
    condor_submit_path,
    submit_all,
    write_condor_files,
)
from posttrainbench.host.sweep.plan import (
    check_catalog,
    compile_tasks,
    default_sweep_dir,
    job_config,
    job_name_of,
    open_sweep_dir,
    write_job_config,
)
from posttrainbench.host.sweep.runner_state import LOCK_FILE, write_runner_info
from posttrainbench.host.sweep.spec import SweepError, SweepSpec
from posttrainbench.host.sweep.trials import trials_to_retry

LOCK_TRIES = 10


class SweepRequest(BaseModel):
    """What `ptb sweep` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    spec: SweepSpec
    out: Path | None = None
    name: str | None = None
    dry_run: bool = False
    auth: AuthMode = AuthMode.AUTO
    secrets_dir: Path | None = None
    condor_requirements: str | None = Field(
        default=None, description="--env condor: a ClassAd expression"
    )
    condor_env: CondorEnv = Field(
        default="docker", description="--env condor: Harbor's environment on the node"
    )
    command: list[str] | None = Field(
        default=None, description="argv that started the sweep: `ptb sweep status`'s resume hint"
    )


class SweepOutcome(BaseModel):
    """What a sweep invocation did."""

    sweep_dir: Path
    job_file: Path
    commands: list[str] = Field(default_factory=list, description="what --dry-run would run")
    retired: list[str] = Field(
        default_factory=list,
        description="trials with an infra or verifier error moved aside to run again",
    )
    ran: bool = False
    submitted: list[str] = Field(
        default_factory=list, description="--env condor: trials given to condor_submit"
    )
    note: str | None = Field(
        default=None, description="One line about the commands (why they were not run)"
    )
    skipped: list[str] = Field(
        default_factory=list, description="--env condor: trials not submitted again, and why"
    )
    warnings: list[str] = Field(
        default_factory=list, description="volumes of retired trials that could not be removed"
    )


@contextmanager
def sweep_lock(sweep_dir: Path, command: list[str] | None = None) -> Iterator[None]:
    """Hold the sweep's lock; a second runner stops with the first one's pid. While held,
    `runner.json` names this process and *command* (what `ptb sweep status` offers as the
    resume command once the lock is gone)."""
    path = sweep_dir / LOCK_FILE
    handle = open(path, "a+")
    try:
        # A few tries: `ptb sweep status` probes the lock for a moment (runner_state).
        for attempt in range(LOCK_TRIES):
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt + 1 < LOCK_TRIES:
                    time.sleep(0.1)
                    continue
                handle.seek(0)
                pid = handle.read().strip() or "?"
                raise SweepError(
                    f"a sweep is already running in {sweep_dir} (pid {pid}); wait for it or stop "
                    "it first: a second runner would start duplicates of its trials"
                ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        write_runner_info(sweep_dir, command)
        yield
    finally:
        handle.close()


def retire(trials: list[Path], retired_dir: Path) -> tuple[list[str], list[str]]:
    """Move trials to retry aside (kept for the record), so Harbor runs them again, and
    remove their cloud final_model volumes: (trials moved, warning lines)."""
    from posttrainbench.host.results.trial_volumes import release_volumes

    moved, targets = [], []
    for trial in trials:
        retired_dir.mkdir(parents=True, exist_ok=True)
        target = retired_dir / trial.name
        n = 1
        while target.exists():
            n += 1
            target = retired_dir / f"{trial.name}.{n}"
        shutil.move(str(trial), target)
        moved.append(trial.name)
        targets.append((target, target))
    _, warnings = release_volumes(targets, keep=False, with_final_model=False)
    return moved, warnings


def run_sweep(request: SweepRequest) -> SweepOutcome:
    """Plan, compile and (unless a dry run) run or resume the sweep."""
    from posttrainbench.host.runner.preflight import (
        check_agent,
        check_agent_cli_tools,
        check_cloud_login,
        check_credentials,
        check_judge,
        check_local_sandbox,
    )

    spec = request.spec
    check_catalog(spec)
    for choice in spec.agents:  # a misspelt agent stops before any task is compiled or built
        check_agent(choice.agent)
        if spec.reprompt_min_minutes is not None:
            from posttrainbench.host.agents.reprompt import inner_agent_class

            inner_agent_class(choice.agent)
    sweep_dir = (request.out or default_sweep_dir(spec, request.name)).resolve()
    credentials = {}
    condor = None
    if spec.env == "condor":  # a bad condor option stops before anything is written
        condor = CondorSettings.for_sweep(
            spec,
            sweep_dir,
            requirements=request.condor_requirements,
            environment=request.condor_env,
        )
        if not request.dry_run and condor_submit_path():
            check_condor_credentials(spec, os.environ)  # getenv copies the keys at submit time
    if not request.dry_run:
        check_cloud_login(spec.env)
        if spec.env == "local":
            check_local_sandbox()
            for choice in spec.agents:
                check_agent_cli_tools(choice.agent)
        for benchmark in spec.benchmarks:  # an LLM-judged benchmark needs its judge's key
            check_judge(benchmark)
    if not request.dry_run and spec.env != "condor":
        # Before anything is compiled or built: a missing secret stops here.
        for choice in spec.agents:
            credentials[choice.label] = check_credentials(
                choice.agent,
                choice.model,
                runs_dir=sweep_dir.parent,
                auth=request.auth,
                secrets_dir=request.secrets_dir,
            )
    spec = open_sweep_dir(sweep_dir, spec)
    with sweep_lock(sweep_dir, request.command):
        tasks = compile_tasks(sweep_dir, spec)
        config = job_config(
            sweep_dir, spec, tasks, {k: c.agent_env for k, c in credentials.items()}
        )
        job_file = write_job_config(sweep_dir, config)
        outcome = SweepOutcome(sweep_dir=sweep_dir, job_file=job_file)
        if condor is not None:
            return _condor(request, condor, sweep_dir, spec, tasks, outcome)
        if request.dry_run:
            outcome.commands = [f"harbor run -c {job_file}"]
            return outcome
        job_dir = sweep_dir / "jobs" / job_name_of(sweep_dir)
        # A runner killed with kill -9 left its instances' overlays mounted; we hold the
        # lock, so none of them is live, and Harbor must be able to remove their trial dirs.
        for point in release_stale_mounts(sweep_dir / "jobs"):
            outcome.warnings.append(f"unmounted a dead run's sandbox overlay: {point}")
        if spec.retry == "infra":
            outcome.retired, retire_warnings = retire(
                trials_to_retry(job_dir), sweep_dir / "retired"
            )
            outcome.warnings += retire_warnings
        _run_job(config, sweep_dir, spec, credentials)
        outcome.ran = True
        return outcome


def _condor(
    request: SweepRequest,
    settings: CondorSettings,
    sweep_dir: Path,
    spec: SweepSpec,
    tasks: list[Path],
    outcome: SweepOutcome,
) -> SweepOutcome:
    """Write one submit file per trial; submit them when condor_submit is here (not a dry run)."""
    files = write_condor_files(sweep_dir, spec, tasks, settings)
    condor_submit = condor_submit_path()
    if request.dry_run or condor_submit is None:
        outcome.commands = files.commands()
        if not request.dry_run:
            outcome.note = "condor_submit is not on PATH; submit the jobs where it is, with:"
        return outcome
    outcome.submitted, outcome.skipped = submit_all(
        files, condor_submit, settings, retry=spec.retry, retired_dir=sweep_dir / "retired"
    )
    return outcome


def _run_job(config, sweep_dir: Path, spec: SweepSpec, credentials: dict) -> None:
    from harbor.job import Job
    from rich.console import Console

    from posttrainbench.host.credentials.scrub import Scrubber

    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    secrets = {k: v for c in credentials.values() for k, v in c.secret_values.items()}
    scrubber = Scrubber.for_run(os.environ, secrets)
    try:
        if spec.env == "local":
            from posttrainbench.host.runner.prebuild import (
                prebuild_agent_clis,
                prebuild_local_environment,
            )

            for task in config.tasks:
                prebuild_local_environment(Path(task.path), Console(stderr=True))
            if config.tasks and any(is_agent_cli(a.agent) for a in spec.agents):
                prebuild_agent_clis(Path(config.tasks[0].path), Console(stderr=True))

        async def go() -> None:
            job = await Job.create(config)
            await job.run()

        try:
            asyncio.run(go())
        except (FileExistsError, ValueError) as exc:
            # Harbor refuses to resume a job whose trials no longer match the plan.
            raise SweepError(
                f"Harbor cannot resume {sweep_dir / 'jobs' / job_name_of(sweep_dir)}: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ) from None
    finally:
        # Whatever stopped it, nothing the agents wrote keeps a secret (tasks are input).
        scrubber.scrub_tree(sweep_dir / "jobs")
