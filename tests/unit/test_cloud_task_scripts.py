"""The task scripts of cloud runs, run for real in the local sandbox with directories
standing in for the volumes: the collect hook and the verifier's test.sh hand
final_model/ over on the trial's volume, and a task compiled with `--model-from cache`
links its base model from the shared cache volume before the agent's clock starts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from posttrainbench.host.envs.cloud_trial import CACHE_ENV, HANDOFF_ENV
from posttrainbench.host.envs.local_sandbox import LocalSandboxEnvironment
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from tests.sandbox_support import run, write_light_task_env

pytestmark = pytest.mark.environment

VOLUME = "/tmp/volume"  # stands in for /ptb-handoff: the sandbox's root is not writable


def _env(root: Path, compiled: Path, trial: TrialPaths, session: str) -> LocalSandboxEnvironment:
    env_dir = root / "environment"
    if not env_dir.exists():
        write_light_task_env(
            root,
            compiled,
            [f"ptb/{name}" for name in ("collect.sh", "start.sh", "monitor.sh", "base_model.sh")],
        )
        (env_dir / "ptb" / "build.sh").write_text(  # a base model for the collect hook's size cap
            'mkdir -p "$PTB_ROOT/models/base" && echo "{}" > "$PTB_ROOT/models/base/config.json"\n'
        )
        (root / "tests").mkdir(exist_ok=True)
        shutil.copyfile(compiled / "tests" / "test.sh", root / "tests" / "test.sh")
        shutil.copyfile(compiled / "tests" / "task.json", root / "tests" / "task.json")
    return LocalSandboxEnvironment(
        environment_dir=env_dir,
        environment_name="handoff",
        session_id=session,
        trial_paths=trial,
        task_env_config=EnvironmentConfig(),
    )


def test_collect_moves_final_model_onto_the_volume_and_the_verifier_reads_it_there(
    tmp_path: Path, sandbox_cache: Path
) -> None:
    compiled = compile_task("bfcl", "smollm2-135m", tmp_path / "tasks", CompileOptions(hours=0.5))
    trial = TrialPaths(tmp_path / "trial")
    trial.mkdir()
    agent = _env(tmp_path / "light", compiled, trial, "t__env")
    handoff = {HANDOFF_ENV: VOLUME}

    async def collect() -> tuple[str, str]:
        await agent.start(force_build=False)
        try:
            # The agent planted a file on the volume and saved its model.
            await agent.exec(
                f"mkdir -p {VOLUME}/final_model /app/final_model && echo planted > {VOLUME}/x "
                f"&& echo fake > {VOLUME}/final_model/config.json "
                "&& echo real > /app/final_model/config.json"
            )
            result = await agent.exec("bash /opt/ptb/collect.sh", env=handoff)
            assert result.return_code == 0, result.stderr
            listing = await agent.exec(
                f"ls -A {VOLUME}; cat {VOLUME}/final_model/config.json; "
                "ls /app; cat /logs/artifacts/final_model_on_volume"
            )
            without = await agent.exec(
                "mkdir -p /app/final_model && echo again > /app/final_model/config.json "
                "&& bash /opt/ptb/collect.sh > /dev/null && cat /logs/artifacts/final_model/config.json"
            )
            return listing.stdout or "", without.stdout or ""
        finally:
            await agent.stop(delete=True)

    listing, without_volume = run(collect())
    lines = listing.split()
    assert lines[:2] == ["final_model", "real"], (
        listing
    )  # the planted file is gone, the real model is there
    assert "final_model" not in lines[2:-1] and lines[-1] == f"{VOLUME}/final_model"
    assert (
        without_volume.strip() == "again"
    )  # no volume: final_model goes to /logs/artifacts as before


def test_verifier_links_the_volume_only_when_the_collect_hook_said_so(
    tmp_path: Path, sandbox_cache: Path
) -> None:
    compiled = compile_task("bfcl", "smollm2-135m", tmp_path / "tasks", CompileOptions(hours=0.5))
    trial = TrialPaths(tmp_path / "trial")
    trial.mkdir()
    verifier = _env(tmp_path / "light", compiled, trial, "t__verifier__main")

    async def verify(marker: bool) -> str:
        await verifier.start(force_build=False)
        try:
            setup = f"mkdir -p {VOLUME}/final_model /logs/artifacts && rm -rf /logs/artifacts/final_model*"
            if marker:
                setup += f" && echo {VOLUME}/final_model > /logs/artifacts/final_model_on_volume"
            await verifier.exec(setup)
            await verifier.upload_dir(tmp_path / "light" / "tests", "/tests")
            # The evaluation itself fails in this light environment; the link comes first.
            await verifier.exec("bash /tests/test.sh", env={HANDOFF_ENV: VOLUME}, timeout_sec=120)
            link = await verifier.exec("readlink /logs/artifacts/final_model || echo none")
            return (link.stdout or "").strip()
        finally:
            await verifier.stop(delete=True)

    assert run(verify(marker=True)) == f"{VOLUME}/final_model"
    assert run(verify(marker=False)) == "none"


def test_a_task_reading_its_model_from_the_cache_links_it_before_the_clock_starts(
    tmp_path: Path, sandbox_cache: Path
) -> None:
    compiled = compile_task(
        "bfcl", "qwen3-1.7b", tmp_path / "tasks", CompileOptions(hours=0.5, model_from="cache")
    )
    assert (
        "prepare_model" not in (compiled / "environment" / "ptb" / "build.sh").read_text()
    )  # nothing downloaded
    assert "bash /opt/ptb/base_model.sh" in (compiled / "tests" / "test.sh").read_text()
    trial = TrialPaths(tmp_path / "trial")
    trial.mkdir()
    agent = _env(tmp_path / "light", compiled, trial, "t__env")
    cache = "/tmp/cache"  # stands in for /ptb-cache

    async def start(with_model: bool) -> tuple[int, str, str]:
        await agent.start(force_build=False)
        try:
            await agent.exec(f"rm -rf {cache} /opt/ptb/models/base /logs/agent/ptb_start_time")
            if with_model:
                await agent.exec(
                    f"mkdir -p {cache}/models/qwen3-1.7b && echo {{}} > {cache}/models/qwen3-1.7b/config.json"
                )
            result = await agent.exec(
                "PTB_MONITOR_INTERVAL=600 bash /opt/ptb/start.sh", env={CACHE_ENV: cache}
            )
            link = await agent.exec(
                "readlink /opt/ptb/models/base; test -s /logs/agent/ptb_start_time && echo clock"
            )
            return result.return_code, (result.stderr or "").strip(), (link.stdout or "").split()
        finally:
            await agent.stop(delete=True)

    code, _, seen = run(start(with_model=True))
    assert code == 0 and seen == [f"{cache}/models/qwen3-1.7b", "clock"]
    code, err, seen = run(start(with_model=False))
    assert (
        code == 1 and "ptb cache push" in err and seen == []
    )  # the start fails, and the clock never starts
