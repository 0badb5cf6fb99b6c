"""Host-side operations on a cloud trial's volume: fetch `final_model/` from it, remove it.

Used by `ptb results export` once a trial is safely in the results store, and by `ptb
sweep` for errored trials it retires. The SDK calls are the network boundary the tests
stop at.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from posttrainbench.envs.cloud_trial import CloudTrialRecord

FINAL_MODEL = "final_model"


class VolumeError(Exception):
    """A volume operation failed (reported per trial; never stops an export)."""


def fetch_final_model(record: CloudTrialRecord, dest: Path) -> None:
    """Copy `final_model/` from the trial's volume into *dest* (which must not exist)."""
    if record.provider != "modal":
        # Daytona's SDK has no file access to a volume outside a sandbox.
        raise VolumeError(f"cannot read {record.provider} volume {record.handoff_volume} from the host; "
                          "it is kept so that you can copy final_model/ from a sandbox that mounts it")
    import modal

    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        volume = modal.Volume.from_name(record.handoff_volume, version=2)
        found = False
        for entry in volume.iterdir(f"/{FINAL_MODEL}", recursive=True):
            found = True
            target = tmp / PurePosixPath(entry.path.lstrip("/")).relative_to(FINAL_MODEL)
            if entry.type == modal.volume.FileEntryType.DIRECTORY:
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as handle:
                volume.read_file_into_fileobj(entry.path, handle)
        if not found:
            raise VolumeError(f"volume {record.handoff_volume} holds no {FINAL_MODEL}/")
        tmp.rename(dest)
    except VolumeError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as exc:  # the SDK's errors have no common base worth naming
        shutil.rmtree(tmp, ignore_errors=True)
        raise VolumeError(f"cannot read volume {record.handoff_volume}: {exc}") from exc


def delete_volume(record: CloudTrialRecord) -> None:
    """Remove the trial's volume (a volume already gone is fine)."""
    try:
        if record.provider == "modal":
            import modal

            modal.Volume.objects.delete(record.handoff_volume, allow_missing=True)
        else:
            from daytona import Daytona
            from daytona.common.errors import DaytonaNotFoundError

            client = Daytona()
            try:
                client.volume.delete(client.volume.get(record.handoff_volume))
            except DaytonaNotFoundError:
                pass
    except Exception as exc:  # the SDKs' errors have no common base worth naming
        raise VolumeError(f"cannot remove {record.provider} volume {record.handoff_volume}: {exc}") from exc


def upload_models(volume_name: str, models: dict[str, Path]) -> None:
    """Put each prepared model dir at `models/<id>/` of a Modal volume (created if new):
    the layout `--model-from cache` reads at /ptb-cache/models/<id>."""
    import modal

    try:
        volume = modal.Volume.from_name(volume_name, create_if_missing=True)
        with volume.batch_upload(force=True) as batch:
            for model_id, local in models.items():
                batch.put_directory(str(local), f"/models/{model_id}")
    except Exception as exc:  # the SDK's errors have no common base worth naming
        raise VolumeError(f"cannot upload to Modal volume {volume_name}: {exc}") from exc
