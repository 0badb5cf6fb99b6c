"""Deliver an agent task's declared secrets to the root-only side of its environment.

Harbor hands ``[environment.env]`` to every command of a trial (the agent's too), so
secrets cannot travel that way: the agent's unprivileged user must never read them.
The contract instead:

- a compiled agent task that declares secrets has ``environment/ptb-secrets.json``
  (:class:`SecretsManifest`: variable NAMES only, never values);
- PostTrainBench's environment plugins call :func:`deliver_secrets` right after the
  environment has started, before Harbor runs the healthcheck (which starts the
  evaluation service). It takes the values from the host's environment and installs them
  as ``/run/ptb-secrets/secrets.json`` (directory 0700, file 0600, owned by root);
- the service (``serve --secrets-file``) and the verifier's final scoring read that file.

A value never appears on a command line, in an exec environment or in the task dir; the
host copy is a 0600 temp file removed right after the upload. A task without the
manifest is untouched. Plain Harbor environments do not deliver the file, and the task's
healthcheck then fails with one line that names the plugins that do.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from posttrainbench.core.errors import RunError
from posttrainbench.core.secrets_file import (
    SECRETS_DIR,
    SECRETS_PATH,
    SecretValues,
    check_env_names,
)

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

MANIFEST_FILE = "ptb-secrets.json"  # in the task's environment/ dir
# The plugins that deliver the secrets (named by the healthcheck's error line).
DELIVERING_PLUGINS = (
    "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment",
    "posttrainbench.host.envs.docker_trial:DockerTrialEnvironment",
    "posttrainbench.host.envs.modal_trial:ModalTrialEnvironment",
    "posttrainbench.host.envs.daytona_trial:DaytonaTrialEnvironment",
)
_EXEC_TIMEOUT_S = 60


class MissingHostSecretError(RunError):
    """A secret the task declares is not set on the host that runs the trial."""


class SecretsDeliveryError(RunError):
    """The secrets file could not be installed inside the environment."""


class SecretsManifest(BaseModel):
    """``environment/ptb-secrets.json``: which host variables the trusted side needs."""

    model_config = ConfigDict(extra="forbid")

    names: list[str] = Field(
        min_length=1, description="host environment variable names; never values"
    )

    @field_validator("names")
    @classmethod
    def _variable_names(cls, value: list[str]) -> list[str]:
        return check_env_names(value)


def write_manifest(environment_dir: Path, names: list[str]) -> Path | None:
    """Write the manifest into a task's ``environment/`` (nothing when *names* is empty)."""
    if not names:
        return None
    path = Path(environment_dir) / MANIFEST_FILE
    path.write_text(SecretsManifest(names=names).model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_manifest(environment_dir: Path) -> SecretsManifest | None:
    """The task's manifest, or None when it declares no secrets."""
    path = Path(environment_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    return SecretsManifest.model_validate_json(path.read_text(encoding="utf-8"))


def host_values(manifest: SecretsManifest, environ: Mapping[str, str]) -> dict[str, str]:
    """The declared secrets' values from *environ*; raises naming every one that is missing."""
    missing = [name for name in manifest.names if not environ.get(name)]
    if missing:
        raise MissingHostSecretError(
            f"the task declares secret(s) {', '.join(missing)}, which are not set in "
            "the environment that runs Harbor: export them before the run"
        )
    return {name: environ[name] for name in manifest.names}


async def _root_exec(env: BaseEnvironment, command: str, what: str) -> None:
    result = await env.exec(command, user="root", timeout_sec=_EXEC_TIMEOUT_S)
    if result.return_code != 0:
        detail = (result.stderr or result.stdout or "").strip().splitlines()
        raise SecretsDeliveryError(
            f"cannot {what} in the environment: "
            f"{detail[-1] if detail else f'exit status {result.return_code}'}"
        )


async def deliver_secrets(
    env: BaseEnvironment, environ: Mapping[str, str] | None = None
) -> list[str]:
    """Install the task's declared secrets at ``SECRETS_PATH`` (root, 0600); return their names.

    Call it after the environment has started and before the healthcheck. No manifest in
    ``env.environment_dir``: nothing is done and ``[]`` returned.
    """
    manifest = read_manifest(env.environment_dir)
    if manifest is None:
        return []
    values = host_values(manifest, os.environ if environ is None else environ)
    # The directory first, root-only, so the file is never readable by anyone else,
    # not even between the upload and the chmod.
    await _root_exec(
        env,
        f"mkdir -p {SECRETS_DIR} && chown root:root {SECRETS_DIR} && chmod 0700 {SECRETS_DIR}",
        f"create {SECRETS_DIR}",
    )
    fd, local = tempfile.mkstemp(prefix="ptb-secrets-", suffix=".json")  # 0600 by construction
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(SecretValues(values).model_dump_json())
        await env.upload_file(local, SECRETS_PATH)
    finally:
        Path(local).unlink(missing_ok=True)
    await _root_exec(
        env,
        f"chown root:root {SECRETS_PATH} && chmod 0600 {SECRETS_PATH}",
        f"protect {SECRETS_PATH}",
    )
    return list(manifest.names)


class ServiceSecretsMixin:
    """Put first in the bases of a Harbor environment class: its ``start`` then delivers
    the task's secrets once the environment is up."""

    async def start(self, force_build: bool) -> Any:
        result = await super().start(force_build)  # type: ignore[misc]
        await deliver_secrets(self)  # type: ignore[arg-type]
        return result
