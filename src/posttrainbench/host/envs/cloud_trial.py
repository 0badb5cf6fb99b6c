"""What PostTrainBench's cloud environments (Modal, Daytona) share: the per-trial
`final_model` volume, the shared cache volume, the exact GPU pin and the record of all
three that a trial dir keeps (`ptb-cloud.json`).

A trial's agent sandbox and its separate verifier sandbox are two machines. Handing a
multi-GB `final_model/` between them through Harbor's artifact download and re-upload
would cost two transfers through the host; instead both mount one volume made for the
trial, at `HANDOFF_MOUNT`. The collect hook (after the agent ends) clears it and moves
`final_model/` onto it; the verifier mounts it and reads it there. Harbor stops the
agent's sandbox only after the verifier, so the hook commits the volume itself (`sync`).

An agent task's declared secrets are delivered root-only once the sandbox is up (see
`service_secrets`).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import RunError
from posttrainbench.host.envs.service_secrets import deliver_secrets

if TYPE_CHECKING:  # an annotation only: Harbor's task config costs ~30 ms to import, and
    # every export imports this module for its record file's name
    from harbor.models.task.config import EnvironmentConfig

HANDOFF_MOUNT = "/ptb-handoff"
CACHE_MOUNT = "/ptb-cache"
HANDOFF_ENV = "PTB_HANDOFF_DIR"
CACHE_ENV = "PTB_SHARED_CACHE"
RECORD_FILE = "ptb-cloud.json"
GPU_QUERY = "nvidia-smi --query-gpu=name --format=csv,noheader"

# Modal and Daytona both accept letters, digits, '-', '_' and '.' in volume names;
# Modal caps names below 64 characters.
_NAME_MAX = 63
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

Provider = Literal["modal", "daytona"]


class CloudTrialRecord(BaseModel):
    """`<trial dir>/ptb-cloud.json`: what the trial used in the cloud, so the export can
    fetch `final_model` from the volume and remove it afterwards."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider
    handoff_volume: str = Field(description="The trial's own volume holding final_model/")
    cache_volume: str | None = Field(
        default=None, description="Shared read-only cache volume, if any"
    )
    gpu_request: str | None = Field(default=None, description="The GPU spec sent to the provider")
    gpu_seen: list[str] = Field(default_factory=list, description="GPU names the sandbox reported")
    handoff_removed: bool = Field(
        default=False, description="The volume was removed (after export or retirement)"
    )

    def write(self, trial_dir: Path) -> Path:
        """Write the record into the trial dir (atomically)."""
        return write_text_atomic(trial_dir / RECORD_FILE, self.model_dump_json(indent=2) + "\n")


def read_record(trial_dir: Path) -> CloudTrialRecord | None:
    """The trial's cloud record, or None for a trial that did not run in the cloud."""
    path = trial_dir / RECORD_FILE
    if not path.is_file():
        return None
    return CloudTrialRecord.model_validate_json(path.read_text(encoding="utf-8"))


def trial_name(trial_dir: Path) -> str:
    """Harbor's trial name: the trial dir's name (both sandboxes of a trial share it)."""
    return trial_dir.name


def is_agent_session(session_id: str) -> bool:
    """Harbor names the agent's sandbox `<trial>__env` and a verifier's `<trial>__verifier__<step>`."""
    return session_id.endswith("__env")


def handoff_volume_name(trial: str) -> str:
    """A volume name unique to the trial, valid on Modal and Daytona, at most 63 characters."""
    base = "ptb-fm-" + _UNSAFE.sub("-", trial)
    if len(base) <= _NAME_MAX:
        return base
    digest = hashlib.sha1(trial.encode()).hexdigest()[:10]
    return f"{base[: _NAME_MAX - len(digest) - 1]}-{digest}"


def pinned_gpu_types(config: EnvironmentConfig, gpus: int) -> list[str]:
    """The task's GPU types, refusing a GPU task that names none (any GPU would do)."""
    if gpus <= 0:
        return []
    if not config.gpu_types:
        raise RunError(
            "the task asks for a GPU but names no GPU type, so the provider may pick any; "
            "compile it with a GPU type (gpu_types in task.toml)"
        )
    if len(config.gpu_types) > 1:
        raise RunError(
            f"the task accepts several GPU types {config.gpu_types}; a run must pin exactly one"
        )
    return list(config.gpu_types)


def gpu_mismatch(requested: str, seen: list[str]) -> str | None:
    """Why the GPUs the sandbox reports are not the requested type, or None when they are."""
    if not seen:
        return f"the sandbox reported no GPU; {requested} was requested"
    want = requested.rstrip("!+").split("-")[0].upper()
    wrong = [name for name in seen if want not in name.upper().replace(" ", "")]
    if wrong:
        return f"the sandbox got {', '.join(wrong)}, not the requested {requested}"
    return None


class TrialContractOptions(BaseModel):
    """The trial contract's environment kwargs (mixed into a provider's options model)."""

    cache_volume: str | None = Field(
        default=None,
        description="The provider's volume with base models and "
        "data, mounted read-only at /ptb-cache",
    )
    handoff: bool = Field(default=True, description="Hand final_model/ over on a per-trial volume")


class CloudTrialMixin:
    """The trial contract for a Harbor cloud environment class (put it first in the bases).

    The class's options model must have `handoff` and `cache_volume`; the provider class
    mounts the volumes and maps the GPU request.
    """

    provider: Provider

    def _init_trial_contract(self) -> None:
        self._is_agent_sandbox = is_agent_session(self.session_id)
        self._handoff_volume = handoff_volume_name(trial_name(self.trial_paths.trial_dir))
        self._gpu_types = pinned_gpu_types(self.task_env_config, self._effective_gpus)
        if self.options.handoff:
            self._persistent_env[HANDOFF_ENV] = HANDOFF_MOUNT
        if self.options.cache_volume:
            self._persistent_env[CACHE_ENV] = CACHE_MOUNT

    def gpu_request(self) -> str | None:
        """The GPU spec sent to the provider (for the record)."""
        return f"{self._gpu_types[0]}:{self._effective_gpus}" if self._gpu_types else None

    def record(self) -> CloudTrialRecord:
        """What this trial uses in the cloud (written to the trial dir)."""
        return CloudTrialRecord(
            provider=self.provider,
            handoff_volume=self._handoff_volume,
            cache_volume=self.options.cache_volume,
            gpu_request=self.gpu_request(),
        )

    async def start(self, force_build: bool) -> None:
        # The record is written before the sandbox exists, so a trial that fails while
        # starting still names the volume to remove.
        record = self.record()
        writes_record = self._is_agent_sandbox and self.options.handoff
        if writes_record:
            record.write(self.trial_paths.trial_dir)
        await super().start(force_build)
        if self._gpu_types:
            result = await self.exec(GPU_QUERY)
            record.gpu_seen = [
                line.strip() for line in (result.stdout or "").splitlines() if line.strip()
            ]
            if writes_record:
                record.write(self.trial_paths.trial_dir)
            problem = gpu_mismatch(self._gpu_types[0], record.gpu_seen)
            if problem:
                # Harbor records the exception: the trial is errored, never scored on other hardware.
                raise RuntimeError(f"GPU pin not honoured: {problem}")
        # Last, on a sandbox that passed the checks, and before Harbor's healthcheck.
        await deliver_secrets(self)  # type: ignore[arg-type]
