"""The agent's contamination checker as it runs in a task: Python 3.11, offline tokenizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GSM8K = REPO.parent / "shared" / "data" / "gsm8k"


def _tokenizer_dir() -> Path | None:
    # Tasks ship the file in /opt/ptb/tiktoken; here, take the host environment's copy.
    for path in sorted(
        REPO.glob(".venv/lib/python3*/site-packages/litellm/litellm_core_utils/tokenizers")
    ):
        return path
    return None


@pytest.mark.skipif(
    _tokenizer_dir() is None or not GSM8K.exists(), reason="needs the host .venv and shared GSM8K"
)
def test_module_entry_flags_planted_items_and_exits_1(tmp_path: Path) -> None:
    test = [json.loads(line) for line in (GSM8K / "test.jsonl").read_text().splitlines()[:20]]
    reference = tmp_path / "TEST.json"
    reference.write_text(
        json.dumps([{"question": r["question"], "answer": r["answer"]} for r in test])
    )
    train = [line for line in (GSM8K / "train.jsonl").read_text().splitlines()[:200]]
    train.insert(50, json.dumps({"text": test[4]["question"] + "\n" + test[4]["answer"]}))
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(train) + "\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "PTB_TIKTOKEN_DIR": str(_tokenizer_dir()),
        "TIKTOKEN_CACHE_DIR": "",
    }
    cmd = [
        sys.executable,
        "-m",
        "posttrainbench.task.integrity.contamination",
        "--reference",
        str(reference),
        "--input",
        str(data),
        "--json",
        "--workers",
        "2",
    ]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["contaminated"] and [
        (m["locator"], m["test_index"]) for m in report["matches"]
    ] == [("line 51", 4)]
    bad = subprocess.run(
        [*cmd[:3], "--reference", str(tmp_path / "missing.json"), "--input", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


def test_real_checkpoints_give_their_text_and_skip_their_numbers(tmp_path: Path) -> None:
    """torch.save and safetensors files as a trainer writes them: floats skipped, text kept."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from posttrainbench.task.integrity.contamination.unpack import UnpackBudget, unpack_file

    secret = "Natalia sold clips to 48 of her friends in April"
    model = torch.nn.Linear(256, 256)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 256)).sum().backward()
    optimizer.step()
    torch.save(optimizer.state_dict(), tmp_path / "optimizer.pt")
    torch.save({"weights": model.state_dict(), "notes": [secret]}, tmp_path / "with_notes.pt")
    torch.save(
        {"hidden": torch.tensor(list(secret.encode()), dtype=torch.uint8)}, tmp_path / "bytes.pt"
    )
    save_file(
        {"w": model.weight.detach()}, str(tmp_path / "model.safetensors"), metadata={"note": secret}
    )

    def unpack(name: str) -> tuple[list[str], UnpackBudget]:
        budget = UnpackBudget(max_bytes=10**9)
        path = tmp_path / name
        with path.open("rb") as handle:
            pieces = list(unpack_file(handle, path.stat().st_size, name, budget))
        return [p.origin for p in pieces if secret.encode() in p.data], budget

    found, budget = unpack("optimizer.pt")
    assert not found and budget.skipped_numeric >= 2 * 256 * 256 * 4 and budget.used < 64 * 1024
    assert unpack("with_notes.pt")[0]
    assert any("data/" in origin for origin in unpack("bytes.pt")[0])
    found, budget = unpack("model.safetensors")
    assert found and budget.skipped_numeric == 256 * 256 * 4
