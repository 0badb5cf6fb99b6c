"""Host-side operations on a cloud trial's volume: fetch `final_model/` from it, remove it.

Used by `ptb results export` once a trial is safely in the results store, and by `ptb
sweep` for errored trials it retires. The SDK calls are the network boundary the tests
stop at.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import BinaryIO

from posttrainbench.core.nofollow import NEW_FILE_FLAGS, Refused, split_relative
from posttrainbench.core.safe_fs import CopyBudget
from posttrainbench.host.copy_caps import CopyCaps
from posttrainbench.host.envs.cloud_trial import CloudTrialRecord

FINAL_MODEL = "final_model"


class VolumeError(Exception):
    """A volume operation failed (reported per trial; never stops an export)."""


def fetch_final_model(
    record: CloudTrialRecord, dest: Path, budget: CopyBudget | None = None
) -> None:
    """Copy `final_model/` from the trial's volume into *dest* (which must not exist).

    The agent wrote the volume, so every listed entry must be a plain file or directory at
    a path below final_model/ (no `..`, no absolute path, no link or special file), and the
    copy stays within *budget* (by default an export's caps on a local trial's final_model),
    counting the bytes that arrive, not those the listing claims. Anything else is a
    VolumeError saying why, and nothing is left at *dest*.
    """
    if record.provider != "modal":
        # Daytona's SDK has no file access to a volume outside a sandbox.
        raise VolumeError(
            f"cannot read {record.provider} volume {record.handoff_volume} from the host; "
            "it is kept so that you can copy final_model/ from a sandbox that mounts it"
        )
    import modal

    budget = budget if budget is not None else _export_budget()
    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    download: _CappedFile | None = None
    try:
        volume = modal.Volume.from_name(record.handoff_volume, version=2)
        found = False
        tmp.mkdir(parents=True)
        for entry in volume.iterdir(f"/{FINAL_MODEL}", recursive=True):
            found = True
            parts = _below_final_model(entry.path)
            if budget.files >= budget.max_files:
                raise VolumeError(
                    f"{FINAL_MODEL}/ holds more than the cap of {budget.max_files} files "
                    "and directories; not copied"
                )
            budget.files += 1
            target = tmp.joinpath(*parts)
            if entry.type == modal.volume.FileEntryType.DIRECTORY:
                target.mkdir(parents=True, exist_ok=True)
                continue
            if entry.type != modal.volume.FileEntryType.FILE:
                raise VolumeError(
                    f"{entry.path!r} is a {entry.type.name.lower()} entry, not a file or directory; "
                    f"{FINAL_MODEL}/ not copied"
                )
            if not parts:
                raise VolumeError(
                    f"{FINAL_MODEL} on volume {record.handoff_volume} is a file, not a directory"
                )
            if budget.bytes + entry.size > budget.max_bytes:
                raise _over_cap(entry.path, budget)
            target.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(os.open(target, NEW_FILE_FLAGS, 0o644), "wb") as handle:
                download = _CappedFile(handle, entry.path, budget)
                volume.read_file_into_fileobj(entry.path, download)
            budget.bytes += download.size
            download = None
        if not found:
            raise VolumeError(f"volume {record.handoff_volume} holds no {FINAL_MODEL}/")
        tmp.rename(dest)
    except VolumeError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as exc:  # the SDK's errors have no common base worth naming
        shutil.rmtree(tmp, ignore_errors=True)
        if download is not None and download.refusal is not None:  # however the SDK wrapped it
            raise download.refusal from None
        raise VolumeError(f"cannot read volume {record.handoff_volume}: {exc}") from exc


def _export_budget() -> CopyBudget:
    caps = CopyCaps()
    return CopyBudget(max_bytes=caps.final_model_bytes, max_files=caps.final_model_files)


def _below_final_model(volume_path: str) -> list[str]:
    """The components of a listed path below final_model/ (paths are from the volume's root,
    with or without a leading "/"); a VolumeError for any path that would land outside it."""
    for prefix in (f"/{FINAL_MODEL}", FINAL_MODEL):
        if volume_path == prefix or volume_path.startswith(prefix + "/"):
            try:
                return split_relative(volume_path[len(prefix) + 1 :])
            except Refused:
                break
    raise VolumeError(
        f"volume entry {volume_path!r} is not a path below {FINAL_MODEL}/ "
        f"(absolute, or with '..'); {FINAL_MODEL}/ not copied"
    )


def _over_cap(volume_path: str, budget: CopyBudget) -> VolumeError:
    return VolumeError(
        f"{FINAL_MODEL}/ is over the copy cap of {budget.max_bytes} bytes "
        f"(at {volume_path!r}); not copied"
    )


class _CappedFile:
    """The file a download writes into (the SDK seeks and writes blocks in any order); a
    write that would take the copy past its byte budget is refused."""

    def __init__(self, handle: BinaryIO, volume_path: str, budget: CopyBudget) -> None:
        self.handle = handle
        self.volume_path = volume_path
        self.budget = budget
        self.size = 0
        self.refusal: VolumeError | None = None

    def tell(self) -> int:
        """The position the next write goes to."""
        return self.handle.tell()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move to where the next block goes."""
        return self.handle.seek(offset, whence)

    def write(self, data: bytes) -> int:
        """Write at the current position, unless the file would end past the budget."""
        end = self.handle.tell() + len(data)
        if self.budget.bytes + end > self.budget.max_bytes:
            self.refusal = _over_cap(self.volume_path, self.budget)
            raise self.refusal
        written = self.handle.write(data)
        self.size = max(self.size, end)
        return written


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
        raise VolumeError(
            f"cannot remove {record.provider} volume {record.handoff_volume}: {exc}"
        ) from exc


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
