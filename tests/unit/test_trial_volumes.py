"""A cloud trial's final_model volume during export and retirement, up to the network
call: removed once the run is stored, kept when asked or when its model was wanted but
could not be copied, read into the store with --with-final-model."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import modal
import modal.volume
from modal.volume import FileEntry, FileEntryType

from posttrainbench.host.envs.cloud_trial import CloudTrialRecord, handoff_volume_name, read_record
from posttrainbench.host.results.export import export
from posttrainbench.host.sweep.runner import retire
from tests.results_fixtures import TrialSpec, write_job


def _cloud_job(tmp_path: Path, n: int = 2) -> list[Path]:
    job = write_job(tmp_path / "jobs", "sweep", [TrialSpec() for _ in range(n)])
    trials = sorted(p for p in job.iterdir() if p.is_dir())
    for trial in trials:
        CloudTrialRecord(provider="modal", handoff_volume=handoff_volume_name(trial.name)).write(
            trial
        )
    return trials


class FakeVolumes:
    """modal.Volume's network calls: deletions recorded, files served from a dict."""

    def __init__(self, files: dict[str, bytes] | None = None, fail: bool = False) -> None:
        self.deleted: list[str] = []
        self.files = files or {}
        self.fail = fail

    def delete(self, name: str, allow_missing: bool = False) -> None:
        assert allow_missing
        self.deleted.append(name)

    def from_name(self, name: str, **kwargs):
        volume = mock.MagicMock()
        if self.fail:
            volume.iterdir.side_effect = RuntimeError("connection refused")
        else:
            volume.iterdir.return_value = [
                FileEntry(path=p, type=FileEntryType.FILE, mtime=0, size=len(b))
                for p, b in self.files.items()
            ]
        volume.read_file_into_fileobj.side_effect = lambda path, handle: handle.write(
            self.files[path]
        )
        return volume

    def patches(self):
        def delete(_manager, name: str, allow_missing: bool = False) -> None:
            self.delete(name, allow_missing)

        return (
            mock.patch.object(modal.volume.VolumeManager, "delete", delete),
            mock.patch.object(modal.Volume, "from_name", self.from_name),
        )


def _export(fake: FakeVolumes, *args, **kwargs):
    first, second = fake.patches()
    with first, second:
        return export(*args, **kwargs)


def test_volumes_are_removed_once_the_runs_are_stored_up_to_network_call(tmp_path: Path) -> None:
    trials = _cloud_job(tmp_path)
    fake = FakeVolumes()
    summary = _export(fake, [tmp_path / "jobs"], tmp_path / "res")
    names = sorted(handoff_volume_name(t.name) for t in trials)
    assert len(summary.added) == 2 and sorted(fake.deleted) == names == sorted(
        summary.volumes_removed
    )
    assert all(read_record(t).handoff_removed for t in trials)
    again = FakeVolumes()
    _export(again, [tmp_path / "jobs"], tmp_path / "res")
    assert again.deleted == []  # removed once, never asked again


def test_keep_volumes_keeps_them_up_to_network_call(tmp_path: Path) -> None:
    trials = _cloud_job(tmp_path)
    fake = FakeVolumes()
    summary = _export(fake, [tmp_path / "jobs"], tmp_path / "res", keep_volumes=True)
    assert fake.deleted == [] and summary.volumes_removed == []
    assert not any(read_record(t).handoff_removed for t in trials)
    # An unchanged run exported again without --keep-volumes: now its volume goes.
    later = FakeVolumes()
    summary = _export(later, [tmp_path / "jobs"], tmp_path / "res")
    assert summary.unchanged == 2 and len(later.deleted) == 2


def test_final_model_is_read_from_the_volume_into_the_store_up_to_network_call(
    tmp_path: Path,
) -> None:
    _cloud_job(tmp_path, n=1)
    fake = FakeVolumes(
        {"final_model/config.json": b"{}", "final_model/sub/model.safetensors": b"weights"}
    )
    summary = _export(fake, [tmp_path / "jobs"], tmp_path / "res", with_final_model=True, workers=1)
    run_dir = next((tmp_path / "res" / "runs").iterdir())
    assert (run_dir / "final_model" / "sub" / "model.safetensors").read_bytes() == b"weights"
    assert '"final_model_dir": "final_model"' in (run_dir / "record.json").read_text()
    assert len(fake.deleted) == 1 and not summary.warnings


def test_a_volume_whose_model_could_not_be_copied_is_kept_up_to_network_call(
    tmp_path: Path,
) -> None:
    trials = _cloud_job(tmp_path, n=1)
    fake = FakeVolumes(fail=True)
    summary = _export(fake, [tmp_path / "jobs"], tmp_path / "res", with_final_model=True, workers=1)
    assert fake.deleted == [] and not read_record(trials[0]).handoff_removed
    assert any("final_model not copied" in w for w in summary.warnings)
    assert any("kept volume" in w for w in summary.warnings)
    assert len(summary.added) == 1  # the run itself is stored all the same


def test_retired_trials_lose_their_volume_up_to_network_call(tmp_path: Path) -> None:
    trials = _cloud_job(tmp_path, n=1)
    fake = FakeVolumes()
    first, second = fake.patches()
    with first, second:
        moved, warnings = retire(trials, tmp_path / "retired")
    assert moved == [trials[0].name] and not warnings
    assert fake.deleted == [handoff_volume_name(trials[0].name)]
    assert read_record(tmp_path / "retired" / trials[0].name).handoff_removed


def test_export_keeps_a_volume_it_cannot_remove(tmp_path: Path) -> None:
    trials = _cloud_job(tmp_path, n=1)

    def refuse(_manager, name: str, allow_missing: bool = False) -> None:
        raise ConnectionError("no route to host")

    with mock.patch.object(modal.volume.VolumeManager, "delete", refuse):
        summary = export([tmp_path / "jobs"], tmp_path / "res")
    assert len(summary.added) == 1 and summary.volumes_removed == []
    assert any("cannot remove modal volume" in w for w in summary.warnings)
    assert not read_record(trials[0]).handoff_removed


def test_cache_push_uploads_prepared_models_up_to_network_call(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from posttrainbench.host.cli.app import app

    prepared = tmp_path / "cache" / "models" / "qwen3-1.7b"
    prepared.mkdir(parents=True)
    (prepared / "config.json").write_text("{}")  # prepared before: nothing is downloaded
    uploads: list[tuple[str, str]] = []
    asked: list[tuple[str, dict]] = []

    class Batch:
        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        def put_directory(self, local: str, remote: str) -> None:
            uploads.append((local, remote))

    def from_name(name: str, **kwargs):
        asked.append((name, kwargs))
        volume = mock.MagicMock()
        volume.batch_upload.return_value = Batch()
        return volume

    # The login check (tested in test_cli_preflight) would ask Modal for a token first.
    with (
        mock.patch.object(modal.Volume, "from_name", from_name),
        mock.patch("posttrainbench.host.runner.preflight.check_cloud_login", lambda *a, **k: None),
    ):
        result = CliRunner().invoke(
            app,
            [
                "cache",
                "push",
                "ptb-cache",
                "-M",
                "qwen3-1.7b",
                "--cache-dir",
                str(tmp_path / "cache"),
            ],
        )
    assert result.exit_code == 0, result.output
    assert asked == [("ptb-cache", {"create_if_missing": True})]
    assert uploads == [(str(prepared), "/models/qwen3-1.7b")]  # what --model-from cache reads


def test_cache_flags_are_checked_before_anything_runs(tmp_path: Path) -> None:
    from tests.helpers import run_ptb

    cases = [
        (
            (
                "sweep",
                "-b",
                "bfcl",
                "-M",
                "qwen3-1.7b",
                "-a",
                "nop",
                "--env",
                "modal",
                "--model-from",
                "cache",
                "--dry-run",
            ),
            "--model-from cache needs --cache-volume",
        ),
        (
            ("run", "-b", "bfcl", "-M", "qwen3-1.7b", "-a", "nop", "--cache-volume", "c"),
            "--cache-volume: only with --env modal or daytona",
        ),
        (("cache", "push", "v", "-M", "no-such-model"), "unknown"),
    ]
    for args, message in cases:
        result = run_ptb(*args, cwd=tmp_path)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1 and message in lines[0], (
            args,
            result.stderr,
        )
