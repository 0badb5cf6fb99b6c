"""Collecting the agent's data files for the contamination judge (snapshot.py --data)."""

from __future__ import annotations

import json

from posttrainbench.task.sandbox.snapshot import collect_data_files, main


def test_data_files_keep_data_skip_models_and_respect_the_cap(tmp_path, capsys):
    app = tmp_path / "app"
    (app / "data").mkdir(parents=True)
    (app / "data" / "train.jsonl").write_text('{"q": 1}\n' * 10)
    (app / "data" / "big.parquet").write_bytes(b"p" * 5000)
    (app / "notes.txt").write_text("hello")
    (app / "train.py").write_text("print(1)")
    (app / "final_model").mkdir()
    (app / "final_model" / "config.json").write_text("{}")
    ckpt = app / "out" / "checkpoint-10"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"w")
    (ckpt / "trainer_state.json").write_text("{}")
    (app / "tokenizer.json").write_text("{}")
    (app / ".git").mkdir()
    (app / ".git" / "x.json").write_text("{}")
    manifest = collect_data_files(
        app, tmp_path / "data_files", max_file_bytes=10_000, max_total_bytes=1000
    )
    assert manifest["kept"] == ["data/train.jsonl", "notes.txt"]
    assert manifest["skipped"]["data/big.parquet"].startswith("over the total cap")
    assert manifest["skipped"]["out/checkpoint-10/"] == "model directory"
    assert manifest["skipped"]["tokenizer.json"] == "model metadata"
    assert manifest["skipped"]["final_model/"] == "excluded directory"
    assert not (tmp_path / "data_files" / "train.py").exists()
    assert (
        json.loads((tmp_path / "data_files" / "MANIFEST.json").read_text())["kept"]
        == manifest["kept"]
    )
    main(["--src", str(app), "--dest", str(tmp_path / "d2"), "--data"])
    assert "kept 3 data files" in capsys.readouterr().out
    assert (tmp_path / "d2" / "data" / "big.parquet").is_file()
