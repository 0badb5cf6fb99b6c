"""An agent task that declares a secret, compiled and run under Harbor on the local sandbox.

One trial with a probe agent (the agent side is :class:`SecretProbeAgent` below): what it
runs as the agent's user shows the secret is neither in its environment nor readable in
the root-only file; the service's log (names only) shows it loaded the secret, and the
verifier scores the baseline with the secret loaded.
Last, without the delivered file, the task's healthcheck fails with one line.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.config import EnvironmentConfig

from posttrainbench.core.secrets_file import SECRETS_PATH
from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from tests.agent_task_e2e_checks import check_clean_audit
from tests.unit.test_agent_task_compiler import make_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None or os.geteuid() != 0,
        reason="needs bubblewrap and root (the agent runs as another user)",
    ),
]

IMPORT_PATH = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
CANARY = "ptb-canary-31d7-secret-channel"

# Run as the agent's user: each line says whether the canary was visible that way.
AGENT_PROBE = f"""
probe() {{ if "$@" 2>/dev/null | grep -q "$PTB_PROBE_CANARY"; then echo true; else echo false; fi; }}
echo "env=$(probe env)"
echo "file=$(probe cat {SECRETS_PATH})"
echo "file_listed=$(ls /run/ptb-secrets >/dev/null 2>&1 && echo true || echo false)"
echo "whoami=$(id -un)"
"""


class SecretProbeAgent(BaseAgent):
    """Probes what the agent's user can see; writes only booleans to its logs (never the value)."""

    @staticmethod
    def name() -> str:
        return "secret-probe"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        # The canary to look for travels in this exec's env (a test value, not a real secret).
        seen = await environment.exec(
            AGENT_PROBE, env={"PTB_PROBE_CANARY": CANARY.replace("canary", "canar[y]")}
        )
        report = dict(line.split("=", 1) for line in seen.stdout.splitlines() if "=" in line)
        (self.logs_dir / "probe.json").write_text(json.dumps(report))


def run_probe_trial(task: Path, jobs: Path, environment: object):
    """One trial of :class:`SecretProbeAgent` on *task*; its result."""
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, TaskConfig

    agent = AgentConfig(import_path=f"{__name__}:SecretProbeAgent")
    config = JobConfig(
        job_name="agent-task-secrets",
        jobs_dir=jobs,
        n_concurrent_trials=1,
        quiet=True,
        agents=[agent],
        tasks=[TaskConfig(path=task)],
        environment=environment,
    )

    async def run():
        job = await Job.create(config)
        return await job.run()

    (trial,) = asyncio.run(run()).trial_results  # type: ignore[attr-defined]
    return trial


def check_probe_trial(trial) -> None:
    """The agent's user saw no secret; the service and final scoring had it; nothing kept holds it."""
    assert trial.exception_info is None, trial.exception_info
    trial_dir = Path(trial.trial_uri.removeprefix("file://"))
    probe = json.loads((trial_dir / "agent" / "probe.json").read_text())
    assert probe == {"env": "false", "file": "false", "file_listed": "false", "whoami": "agent"}, (
        probe
    )
    verifier = trial_dir / "verifier"
    assert "secrets loaded: PTB_TEST_SECRET" in (verifier / "service.log").read_text()
    # The verifier's final scoring ran with the secret loaded: the baseline got a real score.
    assert "error" not in (verifier / "final_score.log").read_text()
    final = json.loads((verifier / "final.json").read_text())
    assert (
        final["chosen"] == "baseline" and final["error"] is None and final["rewards"]["reward"] > 0
    )
    assert json.loads((verifier / "reward.json").read_text()) == final["rewards"]
    isolation = check_clean_audit(
        verifier
    )  # neither the agent's user nor a candidate uid can read it
    assert isolation["probes"]["agent"]["read"][SECRETS_PATH] is False
    assert isolation["probes"]["candidate"]["read"][SECRETS_PATH] is False
    # Nothing the trial kept holds the value (the sandbox's root with the file is gone).
    for path in trial_dir.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def _healthcheck_without_the_file(task: Path, tmp_path: Path):
    """Start the task's environment (secrets delivered), remove the file, run the healthcheck."""
    from harbor.models.task.config import NetworkPolicy, TaskConfig
    from harbor.models.trial.paths import TrialPaths

    from posttrainbench.host.envs.local_sandbox import LocalSandboxEnvironment

    task_config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    trial = TrialPaths(tmp_path / "bare" / "t")
    trial.mkdir()
    env = LocalSandboxEnvironment(
        environment_dir=task / "environment",
        environment_name="t",
        session_id="t__env",
        trial_paths=trial,
        task_env_config=task_config.environment,
        network_policy=NetworkPolicy(network_mode="no-network"),
    )

    async def body():
        await env.start(force_build=False)
        try:
            await env.exec(f"rm {SECRETS_PATH}", user="root")
            return await env.exec(
                task_config.environment.healthcheck.command, user="root", timeout_sec=120
            )
        finally:
            await env.stop(delete=True)

    return asyncio.run(body())


def test_declared_secret_reaches_the_service_and_verifier_but_not_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PTB_TEST_SECRET", CANARY)
    config = make_config(tmp_path / "src", secrets=["PTB_TEST_SECRET"])
    task = build_agent_task(config, tmp_path / "tasks", BuildOptions(network_mode="no-network"))

    check_probe_trial(
        run_probe_trial(task, tmp_path / "jobs", EnvironmentConfig(import_path=IMPORT_PATH))
    )

    # A plain environment (nothing delivered): the healthcheck fails with one clear line.
    result = _healthcheck_without_the_file(task, tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.return_code == 1 and len(lines) == 1, result.stderr
    assert "PTB_TEST_SECRET" in lines[0] and "docker_trial:DockerTrialEnvironment" in lines[0]
    assert "plain Harbor environments do not" in lines[0]
