"""Mode B: score a candidate by a nested Harbor job of its agent class over Harbor tasks.

The service (trusted) prepares one work directory per (candidate, split, task set):
``code/`` (a clean export of the candidate commit), ``tasks/`` (the split's task dirs),
``jobs/`` (the Harbor job), ``agents/`` (one private dir per trial for the candidate) and
``retired/``. The job runs in a child process, ``python -m
posttrainbench.service.mode_b.nested_harbor JOB_CONFIG``, as the service's own user with the
service's environment (so the environment plugin gets the credentials it needs) and
without the candidate's code on its path: the job's agent is the trusted
:class:`~posttrainbench.service.mode_b.proxy_agent.CandidateProxyAgent`, which runs the
candidate's class in ``agent_host`` as the candidate user and performs its environment
calls (see ``proxy_agent`` for the protocol).

Resume: the work directory is kept; running again moves the trials the retry policy of
``posttrainbench.core.trial_outcome`` runs again (infrastructure and verifier failures,
unfinished trials) to ``retired/``, keeps the rest (an agent's own error included) and
lets Harbor's own resume run what is missing. Timeout: the
child gets SIGTERM (Harbor cancels its trials, the proxies kill their agent hosts, the
environments stop), then SIGKILL after a grace period; every trial that finished with a
reward is still scored.

Trust note: rewards are read from the job's ``result.json`` files, written by Harbor and
its verifier in the trusted child. When the service is root each agent host runs as a
fresh uid (one per trial, from the service's identity pool), confined by the launcher
(``confine``: Landlock writes only in its own trial dir, seccomp, limits; the network
stays open, since candidate agents call model APIs), and is reaped by uid when the trial
ends. It can read its code and write its own trial dir under ``agents/``, and nothing
else here: ``jobs/``, ``tasks/`` (hidden tests included), the service's state, its token
and its secrets stay out of reach; what it does inside the task environment is judged by
the task's own verifier, as for any Harbor agent. ``code/`` is unpacked by root into a
directory only root can write. Run without root, the candidate runs as the service's user
and that separation is absent.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from posttrainbench.core import trusted_python
from posttrainbench.service.mode_b.environment_reset import UnverifiableEnvironmentError
from posttrainbench.service.mode_b.proxy_agent import CandidateSpec
from posttrainbench.service.mode_b.task_set import TaskSample
from posttrainbench.service.mode_b.trial_selection import (
    NestedScoreReport,
    build_report,
    read_trials,
    trials_to_retry,
)
from posttrainbench.service.shared.candidate_run import unpack
from posttrainbench.service.shared.candidates import ArchiveSource
from posttrainbench.service.shared.config import CandidateLimits, ScoringModeB
from posttrainbench.service.shared.identity import IdentityPool

if TYPE_CHECKING:
    from harbor.models.job.config import JobConfig

# How the nested run ended: its own exit, killed at its time limit, or it could not start.
RunStatus = Literal["ok", "timeout", "error"]

JOB_NAME = "nested"
PROXY_IMPORT_PATH = "posttrainbench.service.mode_b.proxy_agent:CandidateProxyAgent"
UNVERIFIABLE = UnverifiableEnvironmentError.__name__
TERM_GRACE_S = 30.0  # how long Harbor gets to cancel trials and stop environments
_STDERR_TAIL = 4000


def work_dir_for(root: Path, label: str, split: str, tasks: list[TaskSample]) -> Path:
    """The per-(candidate, split) directory of one task set (same tasks: same dir, so it resumes)."""
    digest = hashlib.sha256("\n".join(sorted(t.name for t in tasks)).encode()).hexdigest()[:12]
    return Path(root) / label / split / f"{len(tasks)}-{digest}"


def candidate_spec(
    scoring: ScoringModeB, work: Path, limits: CandidateLimits, pool: IdentityPool
) -> CandidateSpec:
    """What the proxy needs to run the candidate's class from ``work/code``, each trial as a fresh uid."""
    return CandidateSpec(
        import_path=scoring.agent_import_path,
        model_name=scoring.agent_model,
        kwargs=dict(scoring.agent_kwargs),
        code_dir=work / "code",
        host_dir=work / "agents",
        identity_pool=pool.path,
        limits=limits,
        python=scoring.agent_python or sys.executable,
        path=scoring.path,
        pass_env=list(scoring.pass_env),
        network=scoring.network,
    )


def job_config(
    scoring: ScoringModeB,
    work: Path,
    tasks: list[TaskSample],
    limits: CandidateLimits,
    pool: IdentityPool,
) -> JobConfig:
    """Harbor's JobConfig of the nested run: the trusted proxy as its agent; attempts, retries
    and concurrency passed through."""
    from harbor.models.job.config import JobConfig, RetryConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig
    from harbor.models.trial.error_policy import ErrorPolicyOverride

    retry = scoring.retry.model_dump(exclude_none=True)
    spec = candidate_spec(scoring, work, limits, pool)
    return JobConfig(
        job_name=JOB_NAME,
        jobs_dir=work / "jobs",
        n_attempts=scoring.n_attempts,
        n_concurrent_trials=scoring.n_concurrent,
        quiet=True,
        retry=RetryConfig.model_validate(retry),
        # No model_name for the proxy: the candidate parses its own (and reports it back).
        agents=[
            AgentConfig(
                import_path=PROXY_IMPORT_PATH, kwargs={"candidate": spec.model_dump(mode="json")}
            )
        ],
        environment=EnvironmentConfig(import_path=scoring.environment),
        tasks=[TaskConfig(path=work / "tasks" / t.path.name) for t in tasks],
        # Harbor grades a trial after an error of a type it does not know: not this one (the
        # verifier would run where the candidate's processes or files are still there), and
        # no retry either (a re-roll the candidate could cause at will).
        override_error_policy={
            UNVERIFIABLE: ErrorPolicyOverride(
                should_retry=False, should_grade=False, has_valid_reward=False
            )
        },
    )


def _clear(path: Path) -> None:
    # The candidate user owned this between runs: never follow a link it may have planted.
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _make_dirs(root: Path, work: Path) -> None:
    # Traversable by the candidate user (it must reach its code and its agents/ dir), not listable.
    parts = work.relative_to(root).parts
    for depth in range(1, len(parts) + 1):
        path = root.joinpath(*parts[:depth])
        path.mkdir(mode=0o711, exist_ok=True)
        os.chmod(path, 0o711)


def _readable_by_all(path: Path) -> None:
    # The candidate user reads (never writes) its code; links are left as they are.
    for current, _dirs, files in os.walk(path):
        os.chmod(current, 0o755)
        for name in files:
            file = Path(current, name)
            if not file.is_symlink():
                os.chmod(file, (file.stat().st_mode & 0o755) | 0o444)


def prepare(
    root: Path,
    work: Path,
    source: ArchiveSource,
    tasks: list[TaskSample],
    scoring: ScoringModeB,
    limits: CandidateLimits,
    pool: IdentityPool,
) -> tuple[Path, list[Path]]:
    """Fresh ``code/``, ``tasks/`` and ``agents/``, trials to retry retired; return (job config file, retired)."""
    root.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    _make_dirs(root, work)
    for name in ("code", "tasks", "agents"):
        _clear(work / name)
    (work / "code").mkdir(mode=0o700)
    unpack(source, work / "code", None, limits)  # as root, into a directory only root can write
    _readable_by_all(work / "code")
    (work / "tasks").mkdir(mode=0o700)  # hidden tests live here: never the candidate's to read
    for task in tasks:
        shutil.copytree(task.path, work / "tasks" / task.path.name, symlinks=True)
    (work / "agents").mkdir(mode=0o711)
    jobs_dir = work / "jobs"
    jobs_dir.mkdir(mode=0o700, exist_ok=True)
    retired = retire(trials_to_retry(jobs_dir / JOB_NAME, scoring.reward_key), work / "retired")
    config_file = work / "job.json"
    config_file.write_text(job_config(scoring, work, tasks, limits, pool).model_dump_json(indent=2))
    os.chmod(config_file, 0o600)
    return config_file, retired


def retire(trials: list[Path], retired_dir: Path) -> list[Path]:
    """Move trials aside (kept for the record) so that Harbor plans them again."""
    moved = []
    for trial in trials:
        retired_dir.mkdir(mode=0o700, exist_ok=True)
        target, n = retired_dir / trial.name, 1
        while target.exists():
            n += 1
            target = retired_dir / f"{trial.name}.{n}"
        shutil.move(str(trial), target)
        moved.append(target)
    return moved


def child_env() -> dict[str, str]:
    """The nested job's environment: the service's own (it is trusted), telemetry off."""
    return {**os.environ, "HARBOR_TELEMETRY": "0"}


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[RunStatus, int | None]:
    try:
        code = proc.wait(timeout=timeout_s)
        return ("ok" if code == 0 else "error"), code
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGTERM)  # Harbor cancels the trials and stops their environments
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return "timeout", None


def run_nested(
    root: Path,
    label: str,
    split: str,
    source: ArchiveSource,
    tasks: list[TaskSample],
    scoring: ScoringModeB,
    limits: CandidateLimits,
    pool: IdentityPool,
    timeout_s: float,
) -> NestedScoreReport:
    """Run (or resume) the nested job of one candidate on *tasks* and score every task."""
    start = time.monotonic()
    work = work_dir_for(root, label, split, tasks)
    config_file, _ = prepare(Path(root), work, source, tasks, scoring, limits, pool)
    stderr_path = work / "nested.log"
    with open(stderr_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                trusted_python.argv(
                    sys.executable,
                    "-m",
                    "posttrainbench.service.mode_b.nested_harbor",
                    str(config_file),
                ),
                cwd=work,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            status: RunStatus = "error"
            code: int | None = None
            log.write(f"cannot start the nested run: {exc.strerror}\n".encode())
        else:
            status, code = _wait(proc, timeout_s)
    tail = stderr_path.read_bytes()[-_STDERR_TAIL:].decode("utf-8", "replace")
    outcomes = read_trials(work / "jobs" / JOB_NAME, scoring.reward_key)
    return build_report(
        [t.name for t in tasks],
        outcomes,
        scoring.aggregation,
        scoring.n_attempts,
        status,
        code,
        round(time.monotonic() - start, 3),
        tail,
    )


async def _run_job(config_file: Path) -> None:
    from harbor.job import Job
    from harbor.models.job.config import JobConfig

    config = JobConfig.model_validate_json(config_file.read_text(encoding="utf-8"))
    job = await Job.create(config)
    current = asyncio.current_task()
    assert current is not None
    # SIGTERM (the nested-run timeout) cancels the job: Harbor then stops every trial.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, current.cancel)
    await job.run()


def main(argv: list[str] | None = None) -> int:
    """The child: ``python -m posttrainbench.service.mode_b.nested_harbor JOB_CONFIG.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            "usage: python -m posttrainbench.service.mode_b.nested_harbor JOB_CONFIG.json",
            file=sys.stderr,
        )
        return 2
    try:
        asyncio.run(_run_job(Path(args[0])))
    except asyncio.CancelledError:
        print("nested run cancelled (timeout)", file=sys.stderr)
        return 124
    return 0


if __name__ == "__main__":
    sys.exit(main())
