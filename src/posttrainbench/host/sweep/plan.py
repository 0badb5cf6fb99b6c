"""A sweep's directory, its compiled tasks and the one Harbor job that runs them.

```
SWEEP_DIR/
  sweep.json          the spec (SweepSpec)
  tasks/<b>-<m>/      compiled once, reused on every resume
  harbor-job.json     the Harbor JobConfig (`harbor run -c` runs the same thing)
  jobs/<name>/<trial>/ Harbor's trial directories (the job is named after the sweep)
  retired/<trial>/    infra/verifier-error trials moved aside before a retry (never deleted)
```
"""

from __future__ import annotations

from pathlib import Path

from harbor.models.job.config import JobConfig
from harbor.models.trial.config import TaskConfig

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.host.agents.clis import is_agent_cli
from posttrainbench.host.runner.environments import harbor_environment, local_resources
from posttrainbench.host.runner.job_runner import LOCAL_ENVS, agent_config
from posttrainbench.host.sweep.spec import SWEEP_FILE, SweepError, SweepSpec
from posttrainbench.host.tasks.compiler import compile_task, task_name

# Sweeps started before each job took its sweep's name; they keep it, so they resume.
LEGACY_JOB_NAME = "sweep"


def job_name_of(sweep_dir: Path) -> str:
    """The sweep's Harbor job name: the sweep directory's own name, so that its trials
    carry it into the results store (`job_name` of each record)."""
    if (sweep_dir / "jobs" / LEGACY_JOB_NAME).is_dir():
        return LEGACY_JOB_NAME
    return sweep_dir.resolve().name


JOB_FILE = "harbor-job.json"


def default_sweep_dir(spec: SweepSpec, name: str | None) -> Path:
    """`./ptb-sweeps/<name or sweep-<digest>>`: the same command finds the same directory."""
    return Path("ptb-sweeps") / (name or f"sweep-{spec.key()}")


def open_sweep_dir(sweep_dir: Path, spec: SweepSpec) -> SweepSpec:
    """Create the directory with its spec, or check that it holds this same sweep."""
    path = sweep_dir / SWEEP_FILE
    if path.is_file():
        try:
            existing = SweepSpec.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            raise SweepError(f"{path} is not a valid sweep spec") from None
        differs = existing.differences(spec)
        if differs:
            was, now = existing.model_dump(mode="json"), spec.model_dump(mode="json")
            changes = "; ".join(f"{k}: started with {was[k]!r}, now {now[k]!r}" for k in differs)
            raise SweepError(
                f"{sweep_dir} holds a sweep with other settings ({changes}; see {path}); "
                "resume it with the same settings, or use another -o or --name"
            )
        spec.dump(path)  # the retry policy may change between resumes
        return spec
    if sweep_dir.exists() and any(sweep_dir.iterdir()):
        raise SweepError(
            f"{sweep_dir} exists and is not a sweep directory; use another -o or --name"
        )
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        spec.dump(path)
    except OSError as exc:
        raise SweepError(
            f"cannot create sweep directory {sweep_dir}: {exc.strerror or exc}"
        ) from None
    return spec


def compile_tasks(sweep_dir: Path, spec: SweepSpec) -> list[Path]:
    """Every (benchmark, model) task, compiled once: an existing task dir is reused."""
    tasks = sweep_dir / "tasks"
    paths = []
    for benchmark in spec.benchmarks:
        for model in spec.models:
            task = tasks / task_name(benchmark, model)
            if not (task / "task.toml").is_file():
                task = compile_task(benchmark, model, tasks, spec.options)
            paths.append(task.resolve())
    return paths


def job_config(
    sweep_dir: Path,
    spec: SweepSpec,
    task_dirs: list[Path],
    agent_envs: dict[str, dict[str, str]] | None = None,
) -> JobConfig:
    """One Harbor job: every task x every agent x attempts, `concurrency` at a time."""
    cpus = memory_mb = None
    if spec.env in LOCAL_ENVS:
        host_cpus, host_mb = local_resources()
        cpus = min(spec.options.cpus, host_cpus)
        memory_mb = min(spec.options.memory_gb * 1024, host_mb)
    envs = agent_envs or {}
    return JobConfig(
        job_name=job_name_of(sweep_dir),
        jobs_dir=(sweep_dir / "jobs").resolve(),
        n_attempts=spec.attempts,
        n_concurrent_trials=spec.concurrency,
        agents=[
            agent_config(
                a.agent, a.model, envs.get(a.label), reprompt_min_minutes=spec.reprompt_min_minutes
            )
            for a in spec.agents
        ],
        environment=harbor_environment(
            "docker" if spec.env == "condor" else spec.env,
            cpus=cpus,
            memory_mb=memory_mb,
            cache_volume=spec.cache_volume,
            agent_clis=any(is_agent_cli(a.agent) for a in spec.agents),
        ),
        tasks=[TaskConfig(path=path) for path in task_dirs],
    )


def write_job_config(sweep_dir: Path, config: JobConfig) -> Path:
    """`harbor-job.json`, for `harbor run -c` and for a person to read."""
    return write_text_atomic(sweep_dir / JOB_FILE, config.model_dump_json(indent=2) + "\n")


def check_catalog(spec: SweepSpec) -> None:
    """Every benchmark and model of the matrix is in the catalog (one clear error otherwise)."""
    from posttrainbench.host.catalog import get_benchmark, get_model

    for benchmark in spec.benchmarks:
        get_benchmark(benchmark)
    for model in spec.models:
        get_model(model)
