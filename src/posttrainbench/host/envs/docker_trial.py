"""Harbor's Docker environment with PostTrainBench's trial contract.

Use it as ``--env posttrainbench.host.envs.docker_trial:DockerTrialEnvironment`` (Harbor's
``--environment-import-path``; ``ptb run --env docker`` does). On top of Harbor's
``DockerEnvironment``:

- an agent task's declared secrets are installed root-only at
  ``/run/ptb-secrets/secrets.json`` once the container is up, before the healthcheck
  (:mod:`posttrainbench.host.envs.service_secrets`);
- when Harbor cancels a command of an unprivileged user (the agent's deadline), every
  process of that user is stopped and killed at once by the task's trusted
  ``stop_user`` (``docker exec`` would leave them running in the container);
- downloads go through a private staging copy and then
  :class:`posttrainbench.host.envs.transfer.Downloader`: links the agent left in its logs or
  in ``final_model`` never reach the trial dir, and caps apply.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import ExecResult
from harbor.environments.docker.docker import DockerEnvironment

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.envs.service_secrets import ServiceSecretsMixin
from posttrainbench.host.envs.transfer import Downloader

# The task's trusted in-sandbox code (model tasks); absent elsewhere, then nothing is run.
STOP_USER = (
    f"test ! -f {MODEL_LAYOUT.lib}/posttrainbench/task/sandbox/stop_user.py"
    f" || PYTHONPATH={MODEL_LAYOUT.lib}"
    f" {MODEL_LAYOUT.python} -P -m posttrainbench.task.sandbox.stop_user --user {{user}}"
)
_STOP_TIMEOUT_SEC = 60
_ROOT_USERS = (None, 0, "0", "root")


class DockerTrialEnvironment(ServiceSecretsMixin, DockerEnvironment):
    """Docker containers with secrets delivery, a hard agent deadline and link-free downloads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # docker cp keeps links as links: staging holds them, the Downloader drops them.
        self._downloader = Downloader(self.logger, hard_links_ok=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Harbor's exec; a cancelled command of an unprivileged user takes all its user's processes along."""
        resolved = self._resolve_user(user)
        try:
            return await super().exec(command, cwd=cwd, env=env, timeout_sec=timeout_sec, user=user)
        except asyncio.CancelledError:
            if resolved not in _ROOT_USERS:
                await asyncio.shield(self._stop_user(str(resolved)))
            raise

    async def _stop_user(self, user: str) -> None:
        try:
            await super().exec(
                STOP_USER.format(user=shlex.quote(user)), user="root", timeout_sec=_STOP_TIMEOUT_SEC
            )
        except Exception as exc:  # the collect hook stops them again
            self.logger.warning("stopping %s's processes at the deadline failed: %s", user, exc)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """docker cp into private staging, then a copy that takes no link or special file."""
        staging = Path(tempfile.mkdtemp(prefix=".ptb-docker-", dir=Path(target_dir).parent))
        try:
            await super().download_dir(source_dir, staging / "tree")
            await asyncio.to_thread(
                self._downloader.download_dir,
                staging,
                "tree",
                Path(target_dir),
                source=source_dir.lstrip("/"),
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """docker cp into private staging, then only a regular file is taken."""
        staging = Path(tempfile.mkdtemp(prefix=".ptb-docker-", dir=Path(target_path).parent))
        try:
            name = PurePosixPath(source_path).name or "file"
            await super().download_file(source_path, staging / name)
            await asyncio.to_thread(
                self._downloader.download_file,
                staging,
                name,
                Path(target_path),
                source=source_path.lstrip("/"),
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)
