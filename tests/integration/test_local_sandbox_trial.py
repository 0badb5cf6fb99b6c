"""A real Harbor trial (oracle agent, separate verifier) on the bubblewrap local sandbox."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

IMPORT_PATH = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"

TASK_TOML = """\
version = "1.0"

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 120.0
environment_mode = "separate"

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
"""


def write_task(root: Path) -> Path:
    """Write a minimal task whose oracle publishes /logs/artifacts/out.txt."""
    task = root / "sandbox-task"
    env = task / "environment"
    (env / "ptb").mkdir(parents=True)
    (env / "workspace").mkdir()
    (env / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (env / "requirements.txt").write_text("")
    (env / "workspace" / "README.txt").write_text("work here\n")
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text("Write 'done' to /app/out.txt.\n")
    (task / "solution").mkdir()
    (task / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nset -e\necho done > /app/out.txt\n"
        "mkdir -p /logs/artifacts\ncp /app/out.txt /logs/artifacts/out.txt\n"
    )
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        'if [ "$(cat /logs/artifacts/out.txt 2>/dev/null)" = done ] && [ ! -e /app/out.txt ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    )
    for script in (task / "solution" / "solve.sh", task / "tests" / "test.sh"):
        script.chmod(0o755)
    return task


def test_oracle_trial_with_separate_verifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    task = write_task(tmp_path)
    config = JobConfig(
        job_name="sandbox-trial",
        jobs_dir=tmp_path / "jobs",
        n_concurrent_trials=1,
        quiet=True,
        agents=[AgentConfig(name="oracle")],
        tasks=[TaskConfig(path=task)],
        environment=EnvironmentConfig(import_path=IMPORT_PATH),
    )

    async def run() -> object:
        job = await Job.create(config)
        return await job.run()

    result = asyncio.run(run())
    (trial,) = result.trial_results  # type: ignore[attr-defined]
    assert trial.exception_info is None, trial.exception_info
    assert trial.verifier_result is not None
    assert trial.verifier_result.rewards == {"reward": 1}
    trial_dir = Path(trial.trial_uri.removeprefix("file://"))
    assert (trial_dir / "artifacts").exists()
    # Instances are deleted at stop (environment.delete defaults to true).
    assert not (trial_dir / "sandbox").exists()


def test_harbor_cli_runs_the_oracle(tmp_path: Path) -> None:
    task = write_task(tmp_path)
    harbor = Path(sys.executable).parent / "harbor"
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "PTB_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(
        [
            str(harbor),
            "run",
            "-p",
            str(task),
            "--env",
            IMPORT_PATH,
            "-a",
            "oracle",
            "-o",
            str(tmp_path / "jobs"),
            "-y",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    rewards = list((tmp_path / "jobs").rglob("verifier/reward.txt"))
    assert [p.read_text().strip() for p in rewards] == ["1"], output[-4000:]
