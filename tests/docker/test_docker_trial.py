"""One real Harbor trial of a compiled task (bfcl x smollm2-135m) on the Docker engine.

Needs a running Docker engine with the Compose v2 plugin and the offline CPU base image:

    scripts/docker/setup_engine.sh
    scripts/docker/build_base_image.sh

The task is compiled with the CPU base image as its Dockerfile's default ``BASE_IMAGE``
(``CompileOptions.base_image``): Harbor's docker environment builds without build args,
and a run-level compose overlay would not reach the separate verifier environment.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from posttrainbench.task.schemas import Metrics
from tests.docker.engine import (
    BENCHMARK,
    CPU_BASE_IMAGE,
    MODEL,
    TRIAL_CPUS,
    TRIAL_MEMORY_GB,
)
from tests.helpers import run_ptb

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_oracle_trial_with_harbor_run_on_docker(docker_ready: None, tmp_path: Path) -> None:
    """The README's commands: `ptb tasks generate`, then `harbor run -e docker`."""
    compiled = run_ptb(
        "tasks",
        "generate",
        "-b",
        BENCHMARK,
        "-M",
        MODEL,
        "--hours",
        "0.2",
        "--cpus",
        str(TRIAL_CPUS),
        "--memory-gb",
        str(TRIAL_MEMORY_GB),
        "--eval-limit",
        "2",
        "--train-steps",
        "2",
        "-o",
        str(tmp_path / "tasks"),
    )
    assert compiled.returncode == 0, compiled.stderr
    task = tmp_path / "tasks" / f"{BENCHMARK}-{MODEL}"
    # A task without GPUs defaults to the offline CPU base image.
    assert f"ARG BASE_IMAGE={CPU_BASE_IMAGE}" in (task / "environment" / "Dockerfile").read_text()

    harbor = Path(sys.executable).with_name("harbor")
    started = time.monotonic()
    result = subprocess.run(
        [
            str(harbor),
            "run",
            "-p",
            str(task),
            "-a",
            "oracle",
            "-e",
            "docker",
            # Docker refuses --cpus above the host's core count; never ask for more.
            "--override-cpus",
            str(min(TRIAL_CPUS, os.cpu_count() or 1)),
            "-o",
            str(tmp_path / "jobs"),
            "-y",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "HARBOR_TELEMETRY": "0"},
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    (result_file,) = [p for p in (tmp_path / "jobs").glob("*/*/result.json")]
    trial = json.loads(result_file.read_text())
    assert trial.get("exception_info") is None, trial["exception_info"]
    verifier = result_file.parent / "verifier"
    reward = json.loads((verifier / "reward.json").read_text())["reward"]
    assert isinstance(reward, (int, float)) and math.isfinite(reward), reward
    error = verifier / "error.txt"
    assert not error.exists(), error.read_text()
    metrics = Metrics.load(verifier / "metrics.json")
    assert metrics.n == 2 and metrics.error is None, metrics
    assert trial["verifier_result"]["rewards"]["reward"] == reward
    print(f"docker oracle trial: reward={reward} in {elapsed:.0f}s")


def test_hostile_agent_on_docker_is_not_root_and_ends_at_the_deadline(
    docker_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route Docker takes differently: `docker exec -u agent`, `docker cp` downloads and a
    deadline that `docker exec` alone would not enforce (its processes outlive the client)."""
    import asyncio

    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    from posttrainbench.host.runner.environments import DOCKER_TRIAL
    from posttrainbench.host.tasks.compiler import compile_task
    from posttrainbench.host.tasks.options import CompileOptions
    from posttrainbench.task.sandbox.handoff import Handoff
    from tests.security.agents.model_task_hostile import REPORT_FILE, parse_report
    from tests.security.host_canaries import CanaryServer, touched_files, watch_files
    from tests.security.planting import files_containing, links_under, make_canary

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docker-canary-7731")
    task = compile_task(
        BENCHMARK,
        MODEL,
        tmp_path / "tasks",
        CompileOptions(
            hours=0.01,
            cpus=TRIAL_CPUS,
            memory_gb=TRIAL_MEMORY_GB,
            final_eval_limit=1,
            verifier_timeout_min=6,
        ),
    )
    canary = make_canary(tmp_path / "host")
    state = watch_files([canary.file])
    loopback = CanaryServer("127.0.0.1")
    agent = AgentConfig(
        import_path="tests.security.agents.model_task_hostile:HostileModelAgent",
        kwargs={
            "attack": "runtime",
            "canary_file": str(canary.file),
            "canary_dir": str(canary.dir),
            "loopback_port": loopback.port,
        },
    )
    config = JobConfig(
        job_name="hostile-docker",
        jobs_dir=tmp_path / "jobs",
        n_concurrent_trials=1,
        quiet=True,
        agents=[agent],
        tasks=[TaskConfig(path=task)],
        environment=EnvironmentConfig(
            import_path=DOCKER_TRIAL, override_cpus=min(TRIAL_CPUS, os.cpu_count() or 1)
        ),
    )

    async def run() -> object:
        return await (await Job.create(config)).run()

    try:
        (trial_result,) = asyncio.run(run()).trial_results  # type: ignore[attr-defined]
    finally:
        loopback.close()
    trial = Path(trial_result.trial_uri.removeprefix("file://"))
    report = parse_report((trial / "agent" / REPORT_FILE).read_text())
    assert report.get("done") == "yes" and report["whoami"] == "agent" and report["uid"] != "0", (
        report
    )
    tampered = {
        key: value for key, value in report.items() if key.startswith(("wrote:", "created:"))
    }
    assert tampered and set(tampered.values()) == {"no"}, tampered
    assert report["net_loopback"] != "open" and loopback.received == []
    # docker cp copies links as links: none reaches the trial dir, nor the host's secrets.
    assert links_under(trial) == [] and touched_files(state) == []
    assert (
        files_containing(trial, canary.text) == []
        and files_containing(trial, "sk-docker-canary-7731") == []
    )
    artifacts = trial / "artifacts" / "logs" / "artifacts"
    handoff = Handoff.read(artifacts)
    assert handoff is not None and handoff.status == "collected" and handoff.agent_survivors == 0, (
        handoff
    )
    ended = datetime.fromisoformat(
        json.loads((trial / "result.json").read_text())["agent_execution"]["finished_at"].replace(
            "Z", "+00:00"
        )
    ).timestamp()
    ticks = [
        float(line.split()[1])
        for line in (artifacts / "final_model" / "notes.txt").read_text().splitlines()
    ]
    assert ticks and [t for t in ticks if t > ended] == []
    metrics = Metrics.load(trial / "verifier" / "metrics.json")
    assert metrics.error is None and metrics.n == 1, metrics
