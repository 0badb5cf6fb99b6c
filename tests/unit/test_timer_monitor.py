"""The agent's clock starts when the agent's environment starts, not at compile time,
and the timer gives the same answer from any directory; the monitor (root's) logs samples
where the agent can neither write nor stop it, and a last one after the agent."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from posttrainbench.host.envs.local_sandbox import LocalSandboxEnvironment
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from tests.sandbox_support import run, write_light_task_env, write_task_env

pytestmark = pytest.mark.environment


def _light_task_env(root: Path, compiled: Path) -> Path:
    """The compiled task's clock and monitor scripts in an environment without heavy deps."""
    env_dir = write_task_env(root)
    for rel in ["ptb/start.sh", "ptb/monitor.sh", "workspace/timer.sh"]:
        shutil.copyfile(compiled / "environment" / rel, env_dir / rel)
    return env_dir


def test_timer_starts_with_the_environment(tmp_path: Path, sandbox_cache: Path) -> None:
    compiled = compile_task("bfcl", "smollm2-135m", tmp_path / "tasks", CompileOptions(hours=0.5))
    env_dir = _light_task_env(tmp_path / "light", compiled)
    trial_paths = TrialPaths(tmp_path / "trial")
    trial_paths.mkdir()
    env = LocalSandboxEnvironment(
        environment_dir=env_dir,
        environment_name="timer",
        session_id="timer__env",
        trial_paths=trial_paths,
        task_env_config=EnvironmentConfig(),
    )

    async def body() -> list[str]:
        await env.start(force_build=False)
        try:
            before = await env.exec("bash /app/timer.sh")
            assert "not started" in (before.stdout or "")
            started = await env.exec("PTB_MONITOR_INTERVAL=1 bash /opt/ptb/start.sh")
            assert started.return_code == 0, started.stderr
            answers = []
            for cwd in ["/", "/tmp", "/app"]:
                result = await env.exec("bash /app/timer.sh", cwd=cwd)
                answers.append((result.stdout or "").strip())
            # A second start (e.g. a healthcheck retry) must not reset the clock.
            stamp = (await env.exec("cat /logs/agent/ptb_start_time")).stdout
            await env.exec("bash /opt/ptb/start.sh")
            assert (await env.exec("cat /logs/agent/ptb_start_time")).stdout == stamp
            # The agent's user cannot move its clock: the stamp is root's, in a sticky dir.
            tamper = await env.exec(
                "echo 0 > /logs/agent/ptb_start_time; rm -f /logs/agent/ptb_start_time; "
                "mv /logs/agent/ptb_start_time /logs/agent/x; echo 1 > /app/timer.sh.mine",
                user="agent",
            )
            assert (await env.exec("cat /logs/agent/ptb_start_time")).stdout == stamp, tamper.stderr
            owners = await env.exec(
                "stat -c %U /app /app/timer.sh /logs/agent/ptb_start_time "
                "/logs/artifacts/system_monitor.log; "
                "ps -eo user=,args= | grep '[m]onitor.sh run' | cut -d' ' -f1"
            )
            assert owners.stdout.split() == ["agent", "agent", "root", "root", "root"], (
                owners.stdout
            )
            # Nor can it stop the monitor or write into its log.
            await env.exec("pkill -KILL -f '[m]onitor.sh run'", user="agent")
            forge = await env.exec(
                "echo FORGED >> /logs/artifacts/system_monitor.log || "
                "rm -f /logs/artifacts/system_monitor.log || exit 7",
                user="agent",
            )
            assert forge.return_code == 7, forge
            time.sleep(1.5)
            final = await env.exec("bash /opt/ptb/monitor.sh final; pgrep -f '[m]onitor.sh run'")
            assert final.return_code == 1, (
                final.stdout
            )  # the sampler took its last sample and exited
            await env.download_dir("/logs/artifacts", trial_paths.artifacts_dir)
            return answers
        finally:
            await env.stop(delete=True)

    answers = run(body())
    # The same clock from every cwd; a loaded machine may cross the 0:30 -> 0:29 minute between reads.
    assert len(answers) == 3 and set(answers) <= {
        "Remaining time (hours:minutes):\n0:29",
        "Remaining time (hours:minutes):\n0:30",
    }, answers
    log = (trial_paths.artifacts_dir / "system_monitor.log").read_text()
    assert log.count("===") >= 3 and "load:" in log and "gpu:" in log
    assert "FORGED" not in log
    last = [line for line in log.splitlines() if line.startswith("===")][-1]
    assert last.endswith("(after the agent)"), log


def test_an_honest_start_leaves_the_assembly_out_of_the_write_set(
    tmp_path: Path, sandbox_cache: Path
) -> None:
    """Issue 36, item 7: five fresh instances, each started and stamped at once (as Harbor
    does), then one file of the agent's: the write set is that file, never the instance's
    `/etc`, `/opt/ptb` (the agent's copy of the test set) or `/app`."""
    compiled = compile_task("bfcl", "smollm2-135m", tmp_path / "tasks", CompileOptions(hours=0.5))
    env_dir = write_light_task_env(
        tmp_path / "light", compiled, ["ptb/start.sh", "ptb/monitor.sh"], ("pydantic", "numpy")
    )
    trial_paths = TrialPaths(tmp_path / "trial")
    trial_paths.mkdir()

    async def one(attempt: int) -> list[str]:
        env = LocalSandboxEnvironment(
            environment_dir=env_dir,
            environment_name="writeset",
            session_id=f"writeset{attempt}__env",
            trial_paths=trial_paths,
            task_env_config=EnvironmentConfig(),
        )
        await env.start(force_build=False)
        try:
            started = await env.exec("bash /opt/ptb/start.sh")
            assert started.return_code == 0, started.stderr
            await env.exec("echo trained > /app/agent_notes.txt", user="agent")
            staged = await env.exec(
                "cd / && PYTHONPATH=/opt/ptb/lib PYTHONDONTWRITEBYTECODE=1 /opt/ptb/venv/bin/python -P -m "
                "posttrainbench.task.integrity.write_set --dest /tmp/ws_out "
                "--exclude /logs/artifacts && cat /tmp/ws_out/MANIFEST.json"
            )
            assert staged.return_code == 0, staged.stderr
            manifest = json.loads((staged.stdout or "").split("\n", 1)[1])
            return [entry["path"] for entry in manifest["entries"]]
        finally:
            await env.stop(delete=True)

    for attempt in range(5):
        paths = run(one(attempt))
        assert "/app/agent_notes.txt" in paths, paths
        assembly = [
            p
            for p in paths
            if p.startswith(("/etc/", "/opt/ptb/", "/usr/"))
            or (p.startswith("/app/") and p != "/app/agent_notes.txt")
        ]
        assert not assembly, (attempt, assembly)
