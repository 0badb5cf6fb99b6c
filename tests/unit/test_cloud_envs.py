"""Modal and Daytona with the trial contract, tested up to the network call: what the
sandboxes are asked for (an exactly pinned GPU, the trial's final_model volume, the
read-only cache volume) and what the trial dir records."""

from __future__ import annotations

import asyncio
from pathlib import Path
from unittest import mock

import modal
import pytest
from daytona._async.volume import AsyncVolumeService
from harbor.environments.base import ExecResult
from harbor.environments.daytona.environment import DaytonaEnvironment
from harbor.environments.modal import ModalEnvironment
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from posttrainbench.core.errors import RunError
from posttrainbench.host.envs.cloud_trial import (
    CloudTrialRecord,
    gpu_mismatch,
    handoff_volume_name,
    read_record,
)
from posttrainbench.host.envs.daytona_trial import DaytonaTrialEnvironment
from posttrainbench.host.envs.modal_trial import ModalTrialEnvironment
from posttrainbench.host.runner.environments import harbor_environment

TRIAL = "gsm8k-qwen3-1.7b__Ab3dE7x"


class NetworkCall(BaseException):
    """Raised where the SDK would reach the provider (not an Exception: Harbor must not retry it)."""


@pytest.fixture
def trial(tmp_path: Path) -> TrialPaths:
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    paths = TrialPaths(tmp_path / "jobs" / "sweep" / TRIAL)
    paths.mkdir()
    return paths


def _config(gpu_types: list[str] | None = None, gpus: int = 1) -> EnvironmentConfig:
    return EnvironmentConfig(gpus=gpus, gpu_types=gpu_types, cpus=16, memory_mb=4096)


def _make(cls, trial: TrialPaths, session: str, config: EnvironmentConfig, **kwargs):
    return cls(
        environment_dir=trial.trial_dir.parents[2] / "env",
        environment_name="t",
        session_id=session,
        trial_paths=trial,
        task_env_config=config,
        **kwargs,
    )


class VolumeCalls:
    """Records modal.Volume.from_name calls and read_only() on what they return."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def from_name(self, name: str, **kwargs):
        call = {"name": name, **kwargs, "read_only": False}
        self.calls.append(call)
        volume = mock.MagicMock(name=f"volume {name}")

        def read_only():
            call["read_only"] = True
            return volume

        volume.read_only.side_effect = read_only
        return volume


def _modal_request(env) -> tuple[dict, VolumeCalls]:
    volumes, captured = VolumeCalls(), {}

    async def create(*args, **kwargs):
        captured.update(kwargs)
        raise NetworkCall

    with (
        mock.patch.object(modal.Volume, "from_name", volumes.from_name),
        mock.patch.object(modal.App.lookup, "aio", mock.AsyncMock()),
        mock.patch.object(modal.Sandbox.create, "aio", create),
        pytest.raises(NetworkCall),
    ):
        asyncio.run(env.start(force_build=False))
    return captured, volumes


def test_modal_agent_sandbox_request_up_to_network_call(trial: TrialPaths) -> None:
    env = _make(
        ModalTrialEnvironment, trial, f"{TRIAL}__env", _config(["H100"]), cache_volume="ptb-cache"
    )
    request, volumes = _modal_request(env)
    assert request["gpu"] == "H100!:1"  # exactly an H100: Modal may otherwise run it on an H200
    handoff, cache = volumes.calls
    assert handoff == {
        "name": handoff_volume_name(TRIAL),
        "create_if_missing": True,
        "version": 2,
        "read_only": False,
    }
    assert cache == {"name": "ptb-cache", "read_only": True}
    assert set(request["volumes"]) == {"/ptb-handoff", "/ptb-cache"}
    assert env._persistent_env["PTB_HANDOFF_DIR"] == "/ptb-handoff"
    # Written before the sandbox exists: a failed start still names the volume to remove.
    record = read_record(trial.trial_dir)
    assert record == CloudTrialRecord(
        provider="modal",
        handoff_volume=handoff_volume_name(TRIAL),
        cache_volume="ptb-cache",
        gpu_request="H100!:1",
    )


def test_modal_verifier_sandbox_mounts_the_trials_volume_read_only_up_to_network_call(
    trial: TrialPaths,
) -> None:
    env = _make(ModalTrialEnvironment, trial, f"{TRIAL}__verifier__main", _config(["A100-80GB"]))
    request, volumes = _modal_request(env)
    assert request["gpu"] == "A100-80GB:1"
    assert volumes.calls == [
        {
            "name": handoff_volume_name(TRIAL),
            "create_if_missing": False,
            "version": 2,
            "read_only": True,
        }
    ]
    assert read_record(trial.trial_dir) is None  # only the agent's sandbox writes the record


def test_a_gpu_task_without_a_gpu_type_is_refused(trial: TrialPaths) -> None:
    with pytest.raises(RunError, match="names no GPU type"):
        _make(ModalTrialEnvironment, trial, f"{TRIAL}__env", _config(None))
    with pytest.raises(RunError, match="exactly one"):
        _make(ModalTrialEnvironment, trial, f"{TRIAL}__env", _config(["H100", "H200"]))
    cpu_only = _make(ModalTrialEnvironment, trial, f"{TRIAL}__env", _config(None, gpus=0))
    assert cpu_only._gpu_config() is None


@pytest.mark.parametrize(
    "seen, ok", [(["NVIDIA H100 80GB HBM3"], True), (["NVIDIA H200"], False), ([], False)]
)
def test_a_sandbox_on_other_gpus_errors_the_trial(
    trial: TrialPaths, seen: list[str], ok: bool
) -> None:
    env = _make(ModalTrialEnvironment, trial, f"{TRIAL}__env", _config(["H100"]))
    answer = ExecResult(stdout="".join(f"{name}\n" for name in seen), stderr="", return_code=0)
    with (
        mock.patch.object(ModalEnvironment, "start", mock.AsyncMock()),
        mock.patch.object(ModalTrialEnvironment, "exec", mock.AsyncMock(return_value=answer)),
    ):
        if ok:
            asyncio.run(env.start(force_build=False))
        else:
            with pytest.raises(RuntimeError, match="GPU pin not honoured"):
                asyncio.run(env.start(force_build=False))
    assert read_record(trial.trial_dir).gpu_seen == seen
    assert (gpu_mismatch("H100", seen) is None) == ok


def test_daytona_sandbox_request_up_to_network_call(trial: TrialPaths, monkeypatch) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", "test-key-not-used")
    env = _make(
        DaytonaTrialEnvironment, trial, f"{TRIAL}__env", _config(["H100"]), cache_volume="ptb-cache"
    )
    asked, captured = [], {}

    async def get(self, name: str, create: bool = False):
        asked.append((name, create))
        return mock.Mock(id=f"id-{name}", state="ready")

    async def create(self, params, daytona=None):
        captured["params"] = params
        raise NetworkCall

    with (
        mock.patch.object(AsyncVolumeService, "get", get),
        mock.patch.object(DaytonaEnvironment, "_create_sandbox", create),
        pytest.raises(NetworkCall),
    ):
        asyncio.run(env.start(force_build=False))
    params = captured["params"]
    assert asked == [(handoff_volume_name(TRIAL), True), ("ptb-cache", False)]
    assert [(m.volume_id, m.mount_path) for m in params.volumes] == [
        (f"id-{handoff_volume_name(TRIAL)}", "/ptb-handoff"),
        ("id-ptb-cache", "/ptb-cache"),
    ]
    assert params.resources.gpu == 1 and [t.value for t in params.resources.gpu_type] == ["H100"]
    assert params.env_vars["PTB_HANDOFF_DIR"] == "/ptb-handoff"
    assert read_record(trial.trial_dir).provider == "daytona"


def test_volume_names_fit_both_providers() -> None:
    long = handoff_volume_name("x" * 200 + "__abc")
    assert len(long) <= 63 and long != handoff_volume_name("x" * 200 + "__abd")
    assert handoff_volume_name("a b/c__d") == "ptb-fm-a-b-c__d"


def test_env_names_map_to_the_trial_contract_classes() -> None:
    modal_env = harbor_environment("modal", cache_volume="ptb-cache")
    assert modal_env.import_path == "posttrainbench.host.envs.modal_trial:ModalTrialEnvironment"
    assert modal_env.kwargs == {"cache_volume": "ptb-cache"}
    assert harbor_environment("daytona").import_path.endswith(
        "daytona_trial:DaytonaTrialEnvironment"
    )
    with pytest.raises(RunError, match="cache volume"):
        harbor_environment("docker", cache_volume="ptb-cache")


@pytest.mark.parametrize("env", ["modal", "daytona"])
def test_a_cloud_run_without_the_providers_login_stops_before_anything(
    tmp_path: Path, env: str
) -> None:
    from tests.helpers import run_ptb

    no_login = {
        "HOME": str(tmp_path / "home"),
        "MODAL_TOKEN_ID": "",
        "MODAL_TOKEN_SECRET": "",
        "DAYTONA_API_KEY": "",
        "DAYTONA_JWT_TOKEN": "",
    }
    for args in (
        (
            "sweep",
            "-b",
            "bfcl",
            "-M",
            "qwen3-1.7b",
            "-a",
            "nop",
            "--env",
            env,
            "-o",
            str(tmp_path / "s"),
        ),
        (
            "run",
            "-b",
            "bfcl",
            "-M",
            "qwen3-1.7b",
            "-a",
            "nop",
            "--env",
            env,
            "--runs-dir",
            str(tmp_path / "r"),
        ),
    ):
        result = run_ptb(*args, env=no_login, cwd=tmp_path)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith(f"error: --env {env}: ") and "requires" in lines[0]
        assert (
            not (tmp_path / "s").exists() and not (tmp_path / "r").exists()
        )  # nothing compiled or written
