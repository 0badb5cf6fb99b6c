"""The collect hook's hand-over of final_model/ and the agent's logs (real files, no sandbox)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from posttrainbench.task.evaluation.verify import run as verify_run
from posttrainbench.task.sandbox.handoff import SIZE_SLACK_BYTES, Handoff, main
from posttrainbench.task.schemas import TaskSpec
from tests.data_fixtures import prepared


def _layout(tmp_path: Path, base_bytes: int = 1000) -> tuple[Path, Path, Path, Path]:
    app, logs, out, base = (tmp_path / name for name in ("app", "logs", "out", "base"))
    for directory in (app, logs, out, base):
        directory.mkdir()
    (base / "model.safetensors").write_bytes(b"b" * base_bytes)
    return app, logs, out, base


def _collect(app: Path, logs: Path, out: Path, base: Path, *extra: str) -> Handoff:
    assert (
        main(
            [
                "--app",
                str(app),
                "--logs",
                str(logs),
                "--out",
                str(out),
                "--base-model",
                str(base),
                *extra,
            ]
        )
        == 0
    )
    handoff = Handoff.read(out)
    assert handoff is not None
    return handoff


def test_a_real_model_is_moved_and_links_and_fifos_in_it_are_dropped(tmp_path: Path) -> None:
    app, logs, out, base = _layout(tmp_path)
    model = app / "final_model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "weights.safetensors").symlink_to(
        base / "model.safetensors"
    )  # a decoy: the base's weights
    os.mkfifo(model / "tokenizer.json")
    (logs / "trace.txt").write_text("steps\n")
    (logs / "host-file").symlink_to("/etc/hostname")
    handoff = _collect(app, logs, out, base)
    assert handoff.status == "collected" and handoff.size is not None
    assert sorted(handoff.size.removed) == ["tokenizer.json", "weights.safetensors"]
    assert sorted(p.name for p in (out / "final_model").iterdir()) == ["config.json"]
    assert not model.exists()
    assert (out / "agent_logs" / "trace.txt").read_text() == "steps\n"
    assert not os.path.lexists(out / "agent_logs" / "host-file")
    assert any("host-file" in line for line in handoff.agent_logs_refused)


@pytest.mark.parametrize("how", ["sparse", "many files"])
def test_a_model_over_the_cap_is_rejected_with_the_reason_in_metrics(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, logs, out, base = _layout(tmp_path)
    model = app / "final_model"
    model.mkdir()
    if how == "sparse":
        with (model / "junk.bin").open("wb") as handle:  # 1 TiB apparent, nothing on disk
            handle.truncate(1024**4)
    else:
        for i in range(10_001):
            (model / f"f{i}").touch()
    handoff = _collect(app, logs, out, base, "--size-factor", "2")
    assert handoff.status == "rejected" and handoff.cap_bytes == 2 * 1000 + SIZE_SLACK_BYTES
    assert "over the cap" in (handoff.reason or ""), handoff.reason
    assert not (out / "final_model").exists() and not model.exists()
    # The verifier scores nothing and says why.
    task = tmp_path / "task.json"
    TaskSpec(
        benchmark="bfcl",
        benchmark_name="BFCL",
        model="m",
        model_source="s",
        hours=1.0,
        gpus=0,
        final_eval_limit=1,
    ).dump(task)
    monkeypatch.setenv("PTB_DATA_DIR", str(prepared("bfcl")))
    metrics, _ = verify_run(task, str(out / "final_model"), tmp_path / "verifier", None)
    assert metrics.accuracy == 0.0
    assert metrics.error == f"final_model rejected by the collect hook: {handoff.reason}"


def test_a_linked_or_missing_final_model_is_not_followed(tmp_path: Path) -> None:
    app, logs, out, base = _layout(tmp_path)
    (app / "final_model").symlink_to(base)
    handoff = _collect(app, logs, out, base)
    assert handoff.status == "rejected" and "symbolic link" in (handoff.reason or "")
    assert not os.path.lexists(out / "final_model") and (base / "model.safetensors").exists()
    (app / "final_model").unlink()
    assert _collect(app, logs, out, base).status == "missing"
    assert json.loads((out / "handoff.json").read_text())["status"] == "missing"


def test_a_volume_gets_a_copy_within_the_cap(tmp_path: Path) -> None:
    app, logs, out, base = _layout(tmp_path)
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "planted").write_text("x")
    (app / "final_model").mkdir()
    (app / "final_model" / "config.json").write_text("{}")
    handoff = _collect(app, logs, out, base, "--handoff-dir", str(volume))
    assert handoff.status == "on_volume"
    assert sorted(p.name for p in volume.iterdir()) == ["final_model"]
    assert (out / "final_model_on_volume").read_text().strip() == str(volume / "final_model")


def test_a_model_nested_too_deep_is_rejected_not_a_crash(tmp_path: Path) -> None:
    app, logs, out, base = _layout(tmp_path)
    deep = app / "final_model"
    for _ in range(70):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "config.json").write_text("{}")
    handoff = _collect(app, logs, out, base)
    assert handoff.status == "rejected" and "nested deeper" in (handoff.reason or "")
    assert not (out / "final_model").exists()
