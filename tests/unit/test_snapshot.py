"""The code snapshot keeps code, drops weights and respects its caps."""

from __future__ import annotations

import json
from pathlib import Path

from posttrainbench.task.sandbox.snapshot import snapshot


def test_snapshot_caps(tmp_path: Path) -> None:
    src = tmp_path / "app"
    (src / "final_model").mkdir(parents=True)
    (src / "final_model" / "config.json").write_text("{}")
    (src / "train.py").write_text("print('hi')\n")
    (src / "model.safetensors").write_bytes(b"0" * 10)
    (src / "big.log").write_bytes(b"x" * 2000)
    (src / "data").mkdir()
    for i in range(5):
        (src / "data" / f"part{i}.txt").write_bytes(b"y" * 300)
    manifest = snapshot(src, tmp_path / "snap", max_file_bytes=1000, max_total_bytes=1000)
    assert "train.py" in manifest["kept"]
    assert manifest["skipped"]["model.safetensors"] == "weights or data file"
    assert manifest["skipped"]["big.log"].startswith("over the per-file cap")
    assert "final_model/" in manifest["skipped"]
    assert manifest["total_bytes"] <= 1000
    assert any(reason == "over the total cap" for reason in manifest["skipped"].values())
    assert not (tmp_path / "snap" / "final_model").exists()
    on_disk = json.loads((tmp_path / "snap" / "MANIFEST.json").read_text())
    assert on_disk["kept"] == manifest["kept"]
