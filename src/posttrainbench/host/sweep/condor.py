"""HTCondor: one submit file per trial, each running ONE Harbor trial on an execute node.

```
SWEEP_DIR/condor/
  run_trial.sh                  the shared wrapper: `harbor run --yes -c CONFIG`
  configs/<trial>.json          one Harbor JobConfig per trial (one task, one agent, 1 attempt)
  <trial>.sub                   one submit file per trial; `condor_submit <trial>.sub`
  logs/<trial>.{log,out,err}    HTCondor's user log, stdout and stderr
```

`<trial>` is `<task>__<agent label, sanitized>__a<k>`. Results go to a shared results
directory (default `SWEEP_DIR/jobs/`), one Harbor job per trial, named like the trial.
Secrets never enter these files: a submit file lists the *names* of the variables its
job needs (`getenv = A, B`), and `condor_submit` copies their values from the shell.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from posttrainbench.core.atomic_write import write_text_atomic as _write
from posttrainbench.host.sweep.spec import AgentChoice, SweepError, SweepSpec

CondorEnv = Literal["docker", "singularity"]
CONDOR_ENVS: tuple[str, ...] = ("docker", "singularity")
CONDOR_DIR = "condor"
WRAPPER = "run_trial.sh"
TEMPLATES = Path(__file__).with_name("templates")
_TEMPLATE_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
_UNSAFE_IN_SUBMIT = re.compile(r"[\n\r$]")


class CondorError(SweepError):
    """HTCondor files cannot be written or submitted as asked."""


def default_harbor() -> str:
    """The `harbor` beside this Python (a venv on the shared filesystem), else `harbor` on PATH."""
    beside = Path(sys.executable).with_name("harbor")
    return str(beside) if beside.is_file() else "harbor"


class CondorSettings(BaseModel):
    """What every submit file of a sweep asks HTCondor for, and how its job runs Harbor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_gpus: int | None = Field(
        default=None,
        ge=0,
        description="None: each task's own GPU count (1 for GPU models, 0 for the offline CPU model)",
    )
    request_cpus: int = Field(default=16, ge=1)
    request_memory_gb: int = Field(default=128, ge=1)
    request_disk_gb: int = Field(default=200, ge=1)
    requirements: str | None = Field(
        default=None,
        description="A ClassAd expression, e.g. (CUDACapability >= 8.0) or a GPU name pin",
    )
    environment: CondorEnv = Field(
        default="docker", description="Harbor's environment on the execute node"
    )
    results_dir: Path = Field(description="The shared directory Harbor writes the trials to")
    harbor: str = Field(
        default_factory=default_harbor, description="The harbor command on the execute node"
    )
    singularity_cache_dir: Path | None = Field(
        default=None, description="Shared .sif cache for the singularity environment"
    )
    reprompt_min_minutes: float | None = Field(
        default=None, description="The sweep's re-prompt minimum"
    )

    @field_validator("requirements")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if _UNSAFE_IN_SUBMIT.search(value):
            raise ValueError(
                "must be one line of ClassAd without '$' (condor_submit would expand it)"
            )
        return value.strip()

    @property
    def request_memory(self) -> str:
        """In HTCondor's unit form (GB is GiB there, as in the task's memory_mb)."""
        return f"{self.request_memory_gb}GB"

    @property
    def request_disk(self) -> str:
        """In HTCondor's unit form (a bare number would be KiB)."""
        return f"{self.request_disk_gb}GB"

    @classmethod
    def for_sweep(
        cls,
        spec: SweepSpec,
        sweep_dir: Path,
        *,
        requirements: str | None = None,
        environment: CondorEnv = "docker",
        results_dir: Path | None = None,
    ) -> CondorSettings:
        """Settings from the sweep's compile options; a bad value is one clear error."""
        from pydantic import ValidationError

        sweep_dir = sweep_dir.resolve()
        options = spec.options
        try:
            return cls(
                request_gpus=options.gpus,
                request_cpus=options.cpus,
                request_memory_gb=options.memory_gb,
                request_disk_gb=options.storage_gb,
                requirements=requirements,
                environment=environment,
                results_dir=(results_dir or sweep_dir / "jobs").resolve(),
                singularity_cache_dir=sweep_dir / CONDOR_DIR / "sif-cache",
                reprompt_min_minutes=spec.reprompt_min_minutes,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = {"requirements": "condor-requirements", "environment": "condor-env"}.get(
                str(first["loc"][0]), str(first["loc"][0])
            )
            raise CondorError(f"invalid --{field}: {first['msg']}") from None


class CondorTrial(BaseModel):
    """One trial's files."""

    name: str
    task_dir: Path
    agent: AgentChoice
    attempt: int
    config_file: Path
    submit_file: Path
    getenv: list[str] = Field(
        default_factory=list, description="Variable names the job takes from the submitter"
    )


class CondorFiles(BaseModel):
    """Everything written under `SWEEP_DIR/condor/`."""

    condor_dir: Path
    wrapper: Path
    trials: list[CondorTrial]

    def commands(self) -> list[str]:
        """`condor_submit <file>`, one per trial."""
        return [f"condor_submit {shlex.quote(str(t.submit_file))}" for t in self.trials]


def sanitize_label(label: str) -> str:
    """An agent label as a file-name part: `pkg.mod:Cls:provider/model` -> `pkg.mod-Cls-provider-model`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "agent"


def trial_name(task_dir: Path, agent: AgentChoice, attempt: int) -> str:
    """`<task>__<agent-label-sanitized>__a<k>`: the submit file's stem and the Harbor job name."""
    return f"{task_dir.name}__{sanitize_label(agent.label)}__a{attempt}"


def agent_key_vars(choice: AgentChoice) -> list[str]:
    """Names of the API-key variables the agent reads (any one of them authenticates it)."""
    from posttrainbench.host.credentials.resolve import spec_for

    return list(spec_for(choice.agent, choice.model).api_key_vars)


def task_env_vars(task_dir: Path) -> list[str]:
    """Names of the `${VAR}` templates of a task (e.g. the LLM judge's key of the verifier)."""
    return sorted(set(_TEMPLATE_VAR.findall((task_dir / "task.toml").read_text(encoding="utf-8"))))


def check_condor_credentials(spec: SweepSpec, env: Mapping[str, str]) -> None:
    """Before submitting: each agent that needs a key finds one in this shell (getenv copies it)."""
    from posttrainbench.host.credentials.resolve import CredentialError, spec_for

    for choice in spec.agents:
        cred = spec_for(choice.agent, choice.model)
        if cred.required and not any(env.get(var) for var in cred.api_key_vars):
            names = " or ".join(cred.api_key_vars) or "a known provider (set AGENT:provider/model)"
            raise CredentialError(
                f"{choice.label} needs {names} in this shell: condor jobs take the key "
                "from the submitting environment (subscription files are not passed)"
            )


def _task_gpus(task_dir: Path) -> int:
    from harbor.models.task.config import TaskConfig as TaskDefinition

    config = TaskDefinition.model_validate_toml(
        (task_dir / "task.toml").read_text(encoding="utf-8")
    )
    return config.environment.gpus or 0


def _check_singularity(task_dir: Path) -> None:
    from harbor.models.task.config import TaskConfig as TaskDefinition

    config = TaskDefinition.model_validate_toml(
        (task_dir / "task.toml").read_text(encoding="utf-8")
    )
    if not config.environment.docker_image:
        raise CondorError(
            f"--condor-env singularity needs a prebuilt image: Harbor's singularity environment reads "
            f"[environment].docker_image (an image name or a .sif), and {task_dir.name} builds from "
            "environment/Dockerfile; use --condor-env docker"
        )


def trial_job_config(settings: CondorSettings, task_dir: Path, choice: AgentChoice, name: str):
    """The trial's own Harbor JobConfig: one task, one agent, one attempt, no secret values."""
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import EnvironmentConfig, TaskConfig

    from posttrainbench.host.runner.job_runner import agent_config

    kwargs = {}
    if settings.environment == "singularity" and settings.singularity_cache_dir is not None:
        kwargs["singularity_image_cache_dir"] = str(settings.singularity_cache_dir)
    return JobConfig(
        job_name=name,
        jobs_dir=settings.results_dir,
        n_attempts=1,
        n_concurrent_trials=1,
        quiet=True,
        agents=[
            agent_config(
                choice.agent, choice.model, reprompt_min_minutes=settings.reprompt_min_minutes
            )
        ],
        environment=EnvironmentConfig(type=settings.environment, kwargs=kwargs),
        tasks=[TaskConfig(path=task_dir)],
    )


def submit_arguments(*args: str) -> str:
    """HTCondor's new argument syntax: double-quoted, each argument in single quotes."""
    quoted = ("'" + a.replace("'", "''").replace('"', '""') + "'" for a in args)
    return '"' + " ".join(quoted) + '"'


def _templates():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["shquote"] = shlex.quote
    return env


def _check_path(path: Path) -> None:
    if _UNSAFE_IN_SUBMIT.search(str(path)):
        raise CondorError(
            f"{path}: a path with '$' or a line break cannot be written into a submit file"
        )


def write_condor_files(
    sweep_dir: Path, spec: SweepSpec, task_dirs: list[Path], settings: CondorSettings
) -> CondorFiles:
    """Write the wrapper, a JobConfig and a submit file per trial (task x agent x attempt)."""
    sweep_dir = sweep_dir.resolve()
    condor_dir = sweep_dir / CONDOR_DIR
    for path in (condor_dir, settings.results_dir, *task_dirs):
        _check_path(path)
    labels = [sanitize_label(a.label) for a in spec.agents]
    if len(set(labels)) != len(labels):
        raise CondorError(
            f"agents {', '.join(a.label for a in spec.agents)} give the same file names; rename one"
        )
    if settings.environment == "singularity":
        for task_dir in task_dirs:
            _check_singularity(task_dir)
    try:
        for sub in ("configs", "logs"):
            (condor_dir / sub).mkdir(parents=True, exist_ok=True)
        settings.results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CondorError(f"cannot create {condor_dir}: {exc.strerror or exc}") from None
    templates = _templates()
    wrapper = condor_dir / WRAPPER
    _write(
        wrapper,
        templates.get_template("run_trial.sh.j2").render(
            harbor=settings.harbor, environment=settings.environment
        ),
        mode=0o755,
    )
    submit = templates.get_template("trial.sub.j2")
    trials = []
    for task_dir in task_dirs:
        gpus = settings.request_gpus if settings.request_gpus is not None else _task_gpus(task_dir)
        task_vars = task_env_vars(task_dir)
        for choice in spec.agents:
            getenv = sorted(set(agent_key_vars(choice)) | set(task_vars))
            for attempt in range(1, spec.attempts + 1):
                name = trial_name(task_dir, choice, attempt)
                trial = CondorTrial(
                    name=name,
                    task_dir=task_dir,
                    agent=choice,
                    attempt=attempt,
                    config_file=condor_dir / "configs" / f"{name}.json",
                    submit_file=condor_dir / f"{name}.sub",
                    getenv=getenv,
                )
                config = trial_job_config(settings, task_dir, choice, name)
                _write(trial.config_file, config.model_dump_json(indent=2) + "\n")
                logs = condor_dir / "logs"
                _write(
                    trial.submit_file,
                    submit.render(
                        name=name,
                        task=task_dir.name,
                        agent=choice.label,
                        attempt=attempt,
                        submit_file=shlex.quote(str(trial.submit_file)),
                        environment=settings.environment,
                        results_dir=settings.results_dir,
                        executable=wrapper,
                        arguments=submit_arguments(str(trial.config_file)),
                        initialdir=condor_dir,
                        log=logs / f"{name}.log",
                        output=logs / f"{name}.out",
                        error=logs / f"{name}.err",
                        request_gpus=gpus,
                        request_cpus=settings.request_cpus,
                        request_memory=settings.request_memory,
                        request_disk=settings.request_disk,
                        requirements=settings.requirements,
                        getenv=getenv,
                        batch_name=f"ptb-{sweep_dir.name}",
                    ),
                )
                trials.append(trial)
    return CondorFiles(condor_dir=condor_dir, wrapper=wrapper, trials=trials)


def condor_submit_path() -> str | None:
    """`condor_submit` on PATH, or None (then the commands are printed instead)."""
    return shutil.which("condor_submit")


class SubmittedTrial(BaseModel):
    """One trial handed to condor_submit."""

    cluster: str | None = Field(default=None, description="the cluster id condor_submit printed")
    submitted_at: str


class SubmittedLedger(BaseModel):
    """`condor/submitted.json`: what was submitted, so a re-run never submits a trial twice."""

    trials: dict[str, SubmittedTrial] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> SubmittedLedger:
        """The ledger, or an empty one (a missing file: nothing was submitted yet)."""
        if not path.is_file():
            return cls()
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            raise CondorError(
                f"{path} is damaged; it records which trials were submitted, so fix or "
                "remove it knowingly (a removed entry is submitted again)"
            ) from None

    def save(self, path: Path) -> None:
        """Atomically, after every submission: a crash never forgets a submitted trial."""
        _write(path, self.model_dump_json(indent=2) + "\n")


LEDGER = "submitted.json"
_CLUSTER = re.compile(r"submitted to cluster (\d+)")


def _trial_results(results_dir: Path, name: str) -> list[Path]:
    """The finished trial dirs of one condor trial's Harbor job (`<results>/<name>/<trial>/`)."""
    job = results_dir / name
    return sorted(p.parent for p in job.glob("*/result.json")) if job.is_dir() else []


def submit_all(
    files: CondorFiles,
    condor_submit: str,
    settings: CondorSettings,
    *,
    retry: str,
    retired_dir: Path,
) -> tuple[list[str], list[str]]:
    """Submit the trials not submitted before; returns (submitted, skipped with why).

    A trial with a finished result is done; one the retry policy runs again (an infra or
    verifier error, see `trials.should_retry`) is moved to *retired_dir* and submitted
    again when *retry* is "infra"; one submitted before
    without a result yet is queued or running and is left alone. The ledger is saved
    after every submission, and the first failure stops with one line.
    """
    from datetime import datetime

    from posttrainbench.host.sweep.trials import should_retry

    ledger_path = files.condor_dir / LEDGER
    ledger = SubmittedLedger.load(ledger_path)
    submitted: list[str] = []
    skipped: list[str] = []
    for trial in files.trials:
        results = _trial_results(settings.results_dir, trial.name)
        if results and not (retry == "infra" and any(should_retry(r) for r in results)):
            skipped.append(f"{trial.name}: finished")
            continue
        if results:  # the policy runs it again: keep the old one aside
            retired_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(
                str(settings.results_dir / trial.name),
                retired_dir / f"{trial.name}.{len(list(retired_dir.iterdir())) + 1}",
            )
            ledger.trials.pop(trial.name, None)
        elif trial.name in ledger.trials:
            cluster = ledger.trials[trial.name].cluster
            skipped.append(
                f"{trial.name}: submitted before (cluster {cluster or '?'}), no result yet"
            )
            continue
        try:
            result = subprocess.run(
                [condor_submit, str(trial.submit_file)],
                cwd=files.condor_dir,
                capture_output=True,
                text=True,
                env=os.environ.copy(),
            )
        except OSError as exc:
            raise CondorError(f"cannot run {condor_submit}: {exc.strerror or exc}") from None
        if result.returncode != 0:
            lines = [
                line.strip()
                for line in (result.stderr + result.stdout).splitlines()
                if line.strip()
            ]
            reason = lines[-1] if lines else "no output"
            raise CondorError(
                f"condor_submit {trial.submit_file} failed (exit {result.returncode}): {reason}; "
                f"{len(submitted)} of {len(files.trials)} trial(s) were submitted before it"
            )
        found = _CLUSTER.search(result.stdout)
        ledger.trials[trial.name] = SubmittedTrial(
            cluster=found.group(1) if found else None, submitted_at=datetime.now(UTC).isoformat()
        )
        ledger.save(ledger_path)
        submitted.append(trial.name)
    return submitted, skipped
