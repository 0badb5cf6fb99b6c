"""Declared secrets reach only the root side of an agent task's environment.

Host side (``host.envs.service_secrets``): the manifest, the values taken from the host, the
root-only upload (a fake environment records every call), the plugins' wiring (Modal,
Docker, the real local sandbox). Inside the task (``secrets_file``, ``serve``):
loading the file, refusing a missing secret, exporting into the trusted process only.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
from pathlib import Path
from unittest import mock

import pytest
import yaml
from harbor.environments.base import ExecResult
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from posttrainbench.core.secrets_file import (
    SECRETS_PATH,
    SecretsFileError,
    export_secrets,
    load_secrets,
)
from posttrainbench.host.envs.service_secrets import (
    DELIVERING_PLUGINS,
    MANIFEST_FILE,
    MissingHostSecretError,
    SecretsDeliveryError,
    SecretsManifest,
    ServiceSecretsMixin,
    deliver_secrets,
    read_manifest,
    write_manifest,
)
from posttrainbench.service.api import serve

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-task-gsm8k"
CANARY = "ptb-canary-5e1b-do-not-leak"
OTHER = "ptb-canary-other-9d2c"


class FakeEnvironment:
    """Records exec and upload calls; an upload keeps the file's content and mode at that moment."""

    def __init__(self, environment_dir: Path, fail_on: str | None = None) -> None:
        self.environment_dir = environment_dir
        self.calls: list[tuple] = []
        self.fail_on = fail_on

    async def exec(
        self, command: str, cwd=None, env=None, timeout_sec=None, user=None
    ) -> ExecResult:
        self.calls.append(("exec", command, user, env))
        failed = self.fail_on is not None and self.fail_on in command
        return ExecResult(
            stdout="",
            stderr="chown: Operation not permitted" if failed else "",
            return_code=1 if failed else 0,
        )

    async def upload_file(self, source_path, target_path: str) -> None:
        source = Path(source_path)
        self.calls.append(
            (
                "upload",
                str(source),
                target_path,
                source.read_text(),
                stat.S_IMODE(source.stat().st_mode),
            )
        )


def _env_dir(tmp_path: Path, names: list[str] | None) -> Path:
    env_dir = tmp_path / "environment"
    env_dir.mkdir()
    if names:
        write_manifest(env_dir, names)
    return env_dir


def test_delivery_uploads_exactly_the_declared_values_root_only(tmp_path: Path) -> None:
    env = FakeEnvironment(_env_dir(tmp_path, ["PTB_TEST_SECRET", "PTB_OTHER"]))
    host = {"PTB_TEST_SECRET": CANARY, "PTB_OTHER": OTHER, "UNDECLARED": "never-sent"}
    assert asyncio.run(deliver_secrets(env, host)) == ["PTB_TEST_SECRET", "PTB_OTHER"]

    kinds = [call[0] for call in env.calls]
    assert kinds == ["exec", "upload", "exec"]  # the root-only directory exists before the file
    mkdir, upload, protect = env.calls
    assert (
        mkdir[2] == "root"
        and "chmod 0700 /run/ptb-secrets" in mkdir[1]
        and "chown root:root" in mkdir[1]
    )
    _, local, target, content, mode = upload
    assert target == SECRETS_PATH == "/run/ptb-secrets/secrets.json"
    assert json.loads(content) == {"PTB_TEST_SECRET": CANARY, "PTB_OTHER": OTHER}
    assert mode == 0o600 and not Path(local).exists()  # the host copy is gone
    assert protect[2] == "root" and f"chmod 0600 {SECRETS_PATH}" in protect[1]
    # No value on any command line or in any exec environment.
    for call in env.calls:
        if call[0] == "exec":
            assert CANARY not in call[1] and call[3] is None


def test_a_missing_host_variable_names_every_missing_one_and_sends_nothing(tmp_path: Path) -> None:
    env = FakeEnvironment(_env_dir(tmp_path, ["PTB_TEST_SECRET", "PTB_OTHER", "PTB_THIRD"]))
    with pytest.raises(MissingHostSecretError) as caught:
        asyncio.run(deliver_secrets(env, {"PTB_OTHER": OTHER, "PTB_THIRD": ""}))
    message = str(caught.value)
    assert "PTB_TEST_SECRET" in message and "PTB_THIRD" in message and OTHER not in message
    assert "\n" not in message and caught.value.exit_code == 2
    assert env.calls == []


def test_no_manifest_means_no_calls(tmp_path: Path) -> None:
    env = FakeEnvironment(_env_dir(tmp_path, None))
    assert asyncio.run(deliver_secrets(env, {"PTB_TEST_SECRET": CANARY})) == []
    assert env.calls == [] and read_manifest(env.environment_dir) is None
    assert write_manifest(env.environment_dir, []) is None


def test_a_failed_root_command_stops_the_delivery_with_one_line(tmp_path: Path) -> None:
    env = FakeEnvironment(_env_dir(tmp_path, ["PTB_TEST_SECRET"]), fail_on="chmod 0600")
    with pytest.raises(SecretsDeliveryError, match="Operation not permitted"):
        asyncio.run(deliver_secrets(env, {"PTB_TEST_SECRET": CANARY}))


def test_the_manifest_holds_variable_names_only(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, ["OPENAI_API_KEY"])
    assert path == tmp_path / MANIFEST_FILE
    assert json.loads(path.read_text()) == {"names": ["OPENAI_API_KEY"]}
    with pytest.raises(ValueError):
        SecretsManifest(names=["not a name=value"])
    with pytest.raises(ValueError):
        SecretsManifest(names=[])


def test_the_mixin_delivers_after_the_environment_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TEST_SECRET", CANARY)
    order: list[str] = []

    class Base(FakeEnvironment):
        async def start(self, force_build: bool) -> None:
            order.append("started")

        async def upload_file(self, source_path, target_path: str) -> None:
            order.append("upload")

    class Plugin(ServiceSecretsMixin, Base):
        pass

    asyncio.run(Plugin(_env_dir(tmp_path, ["PTB_TEST_SECRET"])).start(force_build=False))
    assert order == ["started", "upload"]


def test_docker_plugin_is_harbors_docker_plus_the_delivery() -> None:
    from harbor.environments.docker.docker import DockerEnvironment

    from posttrainbench.host.envs.docker_trial import DockerTrialEnvironment
    from posttrainbench.host.runner.environments import harbor_environment

    assert issubclass(DockerTrialEnvironment, DockerEnvironment)
    assert DockerTrialEnvironment.start is ServiceSecretsMixin.start
    assert "posttrainbench.host.envs.docker_trial:DockerTrialEnvironment" in DELIVERING_PLUGINS
    assert (
        harbor_environment("docker").import_path
        == "posttrainbench.host.envs.docker_trial:DockerTrialEnvironment"
    )


def test_modal_plugin_delivers_after_start_up_to_the_network_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harbor.environments.modal import ModalEnvironment

    from posttrainbench.host.envs.modal_trial import ModalTrialEnvironment

    monkeypatch.setenv("PTB_TEST_SECRET", CANARY)
    env_dir = _env_dir(tmp_path, ["PTB_TEST_SECRET"])
    (env_dir / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    trial = TrialPaths(tmp_path / "jobs" / "j" / "task__abc")
    trial.mkdir()
    env = ModalTrialEnvironment(
        environment_dir=env_dir,
        environment_name="t",
        session_id="task__abc__env",
        trial_paths=trial,
        task_env_config=EnvironmentConfig(cpus=2, memory_mb=1024),
    )
    assert "PTB_TEST_SECRET" not in env._startup_env()  # never in the sandbox's own environment
    fake = FakeEnvironment(env_dir)
    with (
        mock.patch.object(ModalEnvironment, "start", mock.AsyncMock()),
        mock.patch.object(ModalTrialEnvironment, "exec", fake.exec),
        mock.patch.object(ModalTrialEnvironment, "upload_file", fake.upload_file),
    ):
        asyncio.run(env.start(force_build=False))
    assert [call[0] for call in fake.calls] == ["exec", "upload", "exec"]
    assert json.loads(fake.calls[1][3]) == {"PTB_TEST_SECRET": CANARY}


# ---------------------------------------------------------------- inside the task


def _secrets_file(tmp_path: Path, values: dict[str, str]) -> Path:
    path = tmp_path / "secrets.json"
    path.write_text(json.dumps(values))
    return path


def test_load_secrets_returns_the_values_and_refuses_a_missing_one(tmp_path: Path) -> None:
    path = _secrets_file(tmp_path, {"PTB_TEST_SECRET": CANARY, "PTB_OTHER": OTHER})
    assert load_secrets(path, ["PTB_TEST_SECRET"])["PTB_TEST_SECRET"] == CANARY
    with pytest.raises(SecretsFileError) as caught:
        load_secrets(path, ["PTB_TEST_SECRET", "PTB_ABSENT"])
    assert "PTB_ABSENT" in str(caught.value) and CANARY not in str(caught.value)
    with pytest.raises(SecretsFileError, match="cannot read"):
        load_secrets(tmp_path / "absent.json", ["PTB_TEST_SECRET"])
    path.write_text(json.dumps({"PTB_TEST_SECRET": [CANARY]}))
    with pytest.raises(SecretsFileError) as malformed:
        load_secrets(path, ["PTB_TEST_SECRET"])
    assert CANARY not in str(malformed.value)  # a malformed file's message never quotes it
    environ: dict[str, str] = {}
    export_secrets({"PTB_TEST_SECRET": CANARY}, environ)
    assert environ == {"PTB_TEST_SECRET": CANARY}


def _config_with_secrets(tmp_path: Path, names: list[str]) -> Path:
    root = tmp_path / "task"
    shutil.copytree(EXAMPLE / "data", root / "data")
    shutil.copytree(EXAMPLE / "baseline", root / "baseline")
    data = yaml.safe_load((EXAMPLE / "task.yaml").read_text())
    data["secrets"] = names
    (root / "task.yaml").write_text(yaml.safe_dump(data))
    return root / "task.yaml"


def test_serve_puts_the_declared_secrets_into_its_own_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    monkeypatch.delenv("PTB_TEST_SECRET", raising=False)
    config = _config_with_secrets(tmp_path, ["PTB_TEST_SECRET"])
    seen: dict[str, str | None] = {}
    monkeypatch.setattr(serve, "create_app", lambda *a, **k: "app")
    monkeypatch.setattr(
        uvicorn, "run", lambda app, **k: seen.update(value=os.environ.get("PTB_TEST_SECRET"))
    )
    argv = [
        "--config",
        str(config),
        "--state-dir",
        str(tmp_path / "state"),
        "--agent-repo",
        str(tmp_path),
    ]
    assert (
        serve.main(
            [*argv, "--secrets-file", str(_secrets_file(tmp_path, {"PTB_TEST_SECRET": CANARY}))]
        )
        == 0
    )
    assert seen == {"value": CANARY}


def test_serve_refuses_a_secrets_file_without_a_declared_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_with_secrets(tmp_path, ["PTB_TEST_SECRET", "PTB_ABSENT"])
    code = serve.main(
        [
            "--config",
            str(config),
            "--state-dir",
            str(tmp_path / "state"),
            "--agent-repo",
            str(tmp_path),
            "--secrets-file",
            str(_secrets_file(tmp_path, {"PTB_TEST_SECRET": CANARY})),
        ]
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "PTB_ABSENT" in lines[0] and CANARY not in lines[0]
    assert not (tmp_path / "state").exists()  # refused before the service made anything


# ---------------------------------------------------------------- the real local sandbox


@pytest.mark.environment
@pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap and root"
)
def test_local_sandbox_installs_the_file_root_only_and_removes_it_at_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harbor.models.task.config import NetworkPolicy

    from posttrainbench.host.envs.local_sandbox import LocalSandboxEnvironment
    from tests.sandbox_support import write_task_env

    monkeypatch.setenv("PTB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PTB_TEST_SECRET", CANARY)
    env_dir = write_task_env(tmp_path / "task")
    write_manifest(env_dir, ["PTB_TEST_SECRET"])
    trial = TrialPaths(tmp_path / "trial")
    trial.mkdir()
    env = LocalSandboxEnvironment(
        environment_dir=env_dir,
        environment_name="t",
        session_id="trial__env",
        trial_paths=trial,
        task_env_config=EnvironmentConfig(),
        network_policy=NetworkPolicy(),
    )

    async def body() -> dict[str, ExecResult]:
        await env.start(force_build=False)
        try:
            return {
                "modes": await env.exec(
                    f"stat -c '%a %U' /run/ptb-secrets {SECRETS_PATH}", user="root"
                ),
                "root": await env.exec(f"cat {SECRETS_PATH}", user="root"),
                "other": await env.exec(f"cat {SECRETS_PATH}", user="nobody"),
                "env": await env.exec("env", user="nobody"),
            }
        finally:
            await env.stop(delete=False)

    results = asyncio.run(body())
    assert results["modes"].stdout.split("\n")[:2] == ["700 root", "600 root"]
    assert json.loads(results["root"].stdout) == {"PTB_TEST_SECRET": CANARY}
    assert results["other"].return_code != 0 and CANARY not in results["other"].stdout
    assert CANARY not in results["env"].stdout
    # The instance's root lives in the trial dir: the file is gone once it stopped.
    leftovers = [
        p for p in trial.trial_dir.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()
    ]
    assert leftovers == []
