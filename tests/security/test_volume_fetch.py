"""Fetching a cloud trial's final_model from its volume, when the agent wrote the volume.

`ptb results export --with-final-model` copies `final_model/` of a Modal trial's volume to
the host. The agent chose every name and type in it (and its listing is only the volume's
word): an entry whose path climbs out with `..` or is absolute must never be written
outside the destination, a link or special entry is not a model file, and the copy is
capped in bytes (counted as they arrive, whatever the listing claims) and in entries. Each
refusal is a VolumeError with the reason (the export's warning line), and nothing is left
at the destination. The SDK is replaced at its network boundary by a fake listing.
"""

from __future__ import annotations

import os
from pathlib import Path

import modal
import pytest
from modal.volume import FileEntry, FileEntryType

from posttrainbench.core.safe_fs import CopyBudget
from posttrainbench.host.envs.cloud_trial import CloudTrialRecord
from posttrainbench.host.envs.cloud_volumes import VolumeError, fetch_final_model

RECORD = CloudTrialRecord(provider="modal", handoff_volume="ptb-handoff-test")
HOST_SECRET = b"PTB-HOST-CANARY host secret"


class FakeVolume:
    """A volume's listing and files as the SDK hands them over: each file in two blocks,
    the second written first (the SDK seeks and writes blocks as they arrive)."""

    def __init__(
        self, entries: list[tuple[str, FileEntryType, bytes]], claimed: dict[str, int] | None = None
    ):
        self.entries = entries
        self.claimed = claimed or {}
        self.read: list[str] = []

    def iterdir(self, path: str, *, recursive: bool = True):
        assert path == "/final_model" and recursive
        for name, kind, data in self.entries:
            yield FileEntry(path=name, type=kind, mtime=0, size=self.claimed.get(name, len(data)))

    def read_file_into_fileobj(self, path: str, fileobj) -> int:
        self.read.append(path)
        data = next(data for name, _, data in self.entries if name == path)
        start, half = fileobj.tell(), len(data) // 2
        fileobj.seek(start + half)
        fileobj.write(data[half:])
        fileobj.seek(start)
        fileobj.write(data[:half])
        fileobj.seek(start + len(data))
        return len(data)


def _fetch(
    monkeypatch, tmp_path: Path, volume: FakeVolume, budget: CopyBudget | None = None
) -> Path:
    monkeypatch.setattr(modal.Volume, "from_name", lambda name, **kwargs: volume)
    dest = tmp_path / "store" / "run" / "final_model"
    fetch_final_model(RECORD, dest, budget)
    return dest


def _nothing_written(tmp_path: Path, dest: Path) -> None:
    assert not dest.exists() and not dest.with_name("final_model.part").exists()
    escaped = [
        Path(d) / f for d, _, files in os.walk(tmp_path) for f in files if f.startswith("escape")
    ]
    assert escaped == []


def _budget(max_bytes: int = 2**20, max_files: int = 100) -> CopyBudget:
    return CopyBudget(max_bytes=max_bytes, max_files=max_files)


def test_a_plain_model_is_copied_whole(monkeypatch, tmp_path: Path) -> None:
    volume = FakeVolume(
        [
            ("/final_model", FileEntryType.DIRECTORY, b""),
            ("final_model/config.json", FileEntryType.FILE, b'{"a": 1}'),
            ("final_model/sub", FileEntryType.DIRECTORY, b""),
            ("/final_model/sub/model.safetensors", FileEntryType.FILE, b"w" * 1001),
        ]
    )
    dest = _fetch(monkeypatch, tmp_path, volume, _budget())
    assert (dest / "config.json").read_bytes() == b'{"a": 1}'
    assert (dest / "sub" / "model.safetensors").read_bytes() == b"w" * 1001
    assert not dest.with_name("final_model.part").exists()


@pytest.mark.parametrize(
    "path",
    [
        "final_model/../../escape.txt",  # climbs out of the destination
        "/final_model/sub/../../../escape.txt",
        "final_model//{host}/escape.txt",  # absolute below final_model/: joined, it replaces the destination
        "{host}/escape.txt",  # absolute, not below final_model/ at all
    ],
)
def test_a_path_outside_final_model_is_refused(monkeypatch, tmp_path: Path, path: str) -> None:
    host = tmp_path / "host"
    host.mkdir()
    path = path.format(host=host)
    volume = FakeVolume(
        [
            ("final_model/config.json", FileEntryType.FILE, b"{}"),
            (path, FileEntryType.FILE, HOST_SECRET),
        ]
    )
    with pytest.raises(VolumeError, match="not a path below final_model/"):
        _fetch(monkeypatch, tmp_path, volume, _budget())
    _nothing_written(tmp_path, tmp_path / "store" / "run" / "final_model")
    assert path not in volume.read


@pytest.mark.parametrize(
    "kind",
    [FileEntryType.SYMLINK, FileEntryType.FIFO, FileEntryType.SOCKET, FileEntryType.UNSPECIFIED],
)
def test_a_link_or_special_entry_is_refused(
    monkeypatch, tmp_path: Path, kind: FileEntryType
) -> None:
    # What reading a link on the volume gives is the volume's business: it is never taken as a model file.
    volume = FakeVolume(
        [
            ("final_model/config.json", FileEntryType.FILE, b"{}"),
            ("final_model/tokenizer.json", kind, HOST_SECRET),
        ]
    )
    with pytest.raises(VolumeError, match="not a file or directory"):
        _fetch(monkeypatch, tmp_path, volume, _budget())
    _nothing_written(tmp_path, tmp_path / "store" / "run" / "final_model")
    assert "final_model/tokenizer.json" not in volume.read


def test_a_model_over_the_byte_cap_is_refused_before_its_download(
    monkeypatch, tmp_path: Path
) -> None:
    volume = FakeVolume(
        [
            (f"final_model/shard-{i}.safetensors", FileEntryType.FILE, b"x" * 400_000)
            for i in range(4)
        ]
    )
    with pytest.raises(VolumeError, match=f"over the copy cap of {2**20} bytes"):
        _fetch(monkeypatch, tmp_path, volume, _budget())
    _nothing_written(tmp_path, tmp_path / "store" / "run" / "final_model")
    assert len(volume.read) == 2  # the third shard's listed size already exceeds the cap


def test_a_listing_that_understates_a_size_is_capped_as_the_bytes_arrive(
    monkeypatch, tmp_path: Path
) -> None:
    volume = FakeVolume(
        [("final_model/model.safetensors", FileEntryType.FILE, b"x" * 3 * 2**20)],
        claimed={"final_model/model.safetensors": 10},
    )
    with pytest.raises(VolumeError, match="over the copy cap"):
        _fetch(monkeypatch, tmp_path, volume, _budget())
    _nothing_written(tmp_path, tmp_path / "store" / "run" / "final_model")


def test_a_flood_of_entries_is_refused_at_the_cap(monkeypatch, tmp_path: Path) -> None:
    volume = FakeVolume([(f"final_model/d{i}", FileEntryType.DIRECTORY, b"") for i in range(1000)])
    with pytest.raises(VolumeError, match="more than the cap of 100 files and directories"):
        _fetch(monkeypatch, tmp_path, volume, _budget())
    _nothing_written(tmp_path, tmp_path / "store" / "run" / "final_model")


def test_without_a_budget_the_exports_final_model_caps_apply(monkeypatch, tmp_path: Path) -> None:
    from posttrainbench.host.copy_caps import CopyCaps

    cap = CopyCaps().final_model_bytes
    volume = FakeVolume(
        [("final_model/model.safetensors", FileEntryType.FILE, b"w")],
        claimed={"final_model/model.safetensors": cap + 1},
    )
    with pytest.raises(VolumeError, match=f"over the copy cap of {cap} bytes"):
        _fetch(monkeypatch, tmp_path, volume)
    _nothing_written(tmp_path, tmp_path / "store" / "run" / "final_model")
