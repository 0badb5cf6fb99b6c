"""Harbor's Daytona environment with PostTrainBench's trial contract (see `cloud_trial`).

Use it as `--env posttrainbench.host.envs.daytona_trial:DaytonaTrialEnvironment` (`ptb
run/sweep --env daytona` does). Same contract as on Modal: a volume made for the trial
at `/ptb-handoff` for `final_model/`, the shared cache volume at `/ptb-cache`, exactly
one GPU type (Harbor maps it to Daytona's GPU type; one type means no substitute) and a
check of the GPUs the sandbox got, and an agent task's declared secrets installed
root-only (see `service_secrets`). Daytona volumes are shared file systems, so what the
collect hook writes is visible to the verifier's sandbox without a commit.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from harbor.environments.daytona.environment import DaytonaEnvironment, DaytonaOptions

from posttrainbench.host.envs.cloud_trial import (
    CACHE_MOUNT,
    HANDOFF_MOUNT,
    CloudTrialMixin,
    TrialContractOptions,
)

VOLUME_READY_TIMEOUT_S = 120.0


class DaytonaTrialOptions(TrialContractOptions, DaytonaOptions):
    """Harbor's Daytona options plus the trial contract's."""


async def ready_volume(
    client: Any, name: str, *, create: bool, timeout_s: float = VOLUME_READY_TIMEOUT_S
) -> Any:
    """The named volume once Daytona reports it ready (a new one starts as pending)."""
    deadline = time.monotonic() + timeout_s
    volume = await client.volume.get(name, create=create)
    while str(getattr(volume, "state", "ready")).lower().rsplit(".", 1)[-1] != "ready":
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Daytona volume {name} is still {volume.state} after {timeout_s:.0f}s"
            )
        await asyncio.sleep(2)
        volume = await client.volume.get(name)
    return volume


class DaytonaTrialEnvironment(CloudTrialMixin, DaytonaEnvironment):
    """Daytona sandboxes with a per-trial final_model volume and an exactly pinned GPU."""

    provider = "daytona"
    options_model = DaytonaTrialOptions
    options: DaytonaTrialOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_trial_contract()

    async def _create_sandbox(self, params: Any, daytona: Any = None):
        from daytona import VolumeMount

        client = daytona or await self._client_manager.get_client()
        mounts = list(params.volumes or [])
        if self.options.handoff:
            volume = await ready_volume(client, self._handoff_volume, create=self._is_agent_sandbox)
            mounts.append(VolumeMount(volume_id=volume.id, mount_path=HANDOFF_MOUNT))
        if self.options.cache_volume:
            volume = await ready_volume(client, self.options.cache_volume, create=False)
            mounts.append(VolumeMount(volume_id=volume.id, mount_path=CACHE_MOUNT))
        params.volumes = mounts or None
        return await super()._create_sandbox(params, client)
