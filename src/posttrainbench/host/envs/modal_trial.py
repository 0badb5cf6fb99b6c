"""Harbor's Modal environment with PostTrainBench's trial contract (see `cloud_trial`).

Use it as `--env posttrainbench.host.envs.modal_trial:ModalTrialEnvironment` (`ptb run/sweep
--env modal` does). On top of Harbor's `ModalEnvironment` it

- mounts a v2 volume made for the trial at `/ptb-handoff` (created, if missing, with the
  agent's sandbox; read-only in the verifier's), for `final_model/`;
- mounts the shared cache volume read-only at `/ptb-cache` when `cache_volume` is given;
- pins the GPU type exactly: Modal may run an `H100` request on an H200 unless it is
  asked for `H100!`; a GPU task without a GPU type is refused;
- checks after start that the sandbox's GPUs are the requested type, and writes
  `ptb-cloud.json` into the trial dir;
- installs an agent task's declared secrets root-only (see `service_secrets`).
"""

from __future__ import annotations

from typing import Any

from harbor.environments.modal import ModalEnvironment, ModalOptions

from posttrainbench.host.envs.cloud_trial import (
    CACHE_MOUNT,
    HANDOFF_MOUNT,
    CloudTrialMixin,
    TrialContractOptions,
)

# Modal types it may upgrade silently, and the spelling that forbids that.
EXACT_GPU = {"H100": "H100!"}


class ModalTrialOptions(TrialContractOptions, ModalOptions):
    """Harbor's Modal options plus the trial contract's."""


class ModalTrialEnvironment(CloudTrialMixin, ModalEnvironment):
    """Modal sandboxes with a per-trial final_model volume and an exactly pinned GPU."""

    provider = "modal"
    options_model = ModalTrialOptions
    options: ModalTrialOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_trial_contract()

    def gpu_request(self) -> str | None:
        if not self._gpu_types:
            return None
        kind = EXACT_GPU.get(self._gpu_types[0].upper(), self._gpu_types[0])
        return f"{kind}:{self._effective_gpus}"

    def _gpu_config(self) -> str | None:
        return self.gpu_request()

    def _volumes_config(self) -> dict[str, Any]:
        from modal import Volume

        volumes = super()._volumes_config()
        if self.options.handoff:
            # Only the agent's sandbox may create the volume; the verifier's must find
            # the one the agent's collect hook filled, and cannot change it.
            handoff = Volume.from_name(
                self._handoff_volume, create_if_missing=self._is_agent_sandbox, version=2
            )
            volumes[HANDOFF_MOUNT] = handoff if self._is_agent_sandbox else handoff.read_only()
        if self.options.cache_volume:
            volumes[CACHE_MOUNT] = Volume.from_name(self.options.cache_volume).read_only()
        return volumes
