"""Canary secrets through a whole real trial: none may survive anywhere in the results.

`ptb run` with a test agent that leaks everything it can reach (tests/canary_agent.py)
on the local sandbox: an API key in the environment, a Codex auth.json in a secrets
dir, and a key-shaped string that no variable name marks as secret.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.host.runner.record import RunRecord
from tests.helpers import REPO, run_ptb

pytestmark = pytest.mark.slow

OPENAI_CANARY = "canary-openai-key-7f3a9c1e5b2d4f60"
CODEX_API_CANARY = "canary-codex-api-key-19e2b7c4d8a6"
PATTERN_CANARY = "sk-proj-CanaryShapedKey0a1b2c3d4e5f6a7b8c9d"  # known to nobody: only its shape
AUTH_TOKENS = {
    "id_token": "canary-id-token-5c1d9e8f7a6b5c4d",
    "access_token": "canary-access-token-0e9d8c7b6a5f4e3d",
    "refresh_token": "canary-refresh-token-1a2b3c4d5e6f7a8b",
    "account_id": "canary-account-id-99887766",
}
CANARIES = [OPENAI_CANARY, CODEX_API_CANARY, PATTERN_CANARY, *AUTH_TOKENS.values()]


def test_no_canary_survives_a_real_trial(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    (secrets / "codex").mkdir(parents=True)
    auth = secrets / "codex" / "auth.json"
    auth.write_text(
        json.dumps({"OPENAI_API_KEY": None, "tokens": AUTH_TOKENS, "last_refresh": "2025-01-01"})
    )
    auth.chmod(0o600)
    runs = tmp_path / "runs"
    result = run_ptb(
        "run",
        "-b",
        "bfcl",
        "-M",
        "smollm2-135m",
        "-a",
        "tests.canary_agent:CanaryAgent",
        "--credentials",
        "codex",
        "--env",
        "local",
        "--hours",
        "0.05",
        "--cpus",
        "2",
        "--memory-gb",
        "8",
        "--eval-limit",
        "2",
        "--runs-dir",
        str(runs),
        "--secrets-dir",
        str(secrets),
        cwd=REPO,
        timeout=1800,
        env={
            "OPENAI_API_KEY": OPENAI_CANARY,
            "CODEX_API_KEY": CODEX_API_CANARY,
            "PTB_CANARY_PATTERN": PATTERN_CANARY,
        },
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "OPENAI_API_KEY, CODEX_API_KEY removed from the agent's environment" in " ".join(
        output.split()
    )
    (record_path,) = runs.glob("*/run.json")
    record = RunRecord.read(record_path)
    (trial,) = record.trials
    # The canary agent writes no model: its own result, scored 0 with the reason kept.
    assert trial.outcome == "no_model" and trial.reward == 0.0, trial
    assert trial.error is not None and "final model not found" in trial.error

    # The credential kind is recorded, never its value; the scrub ran and found the leaks.
    assert record.credentials is not None and record.credentials.kind == "subscription"
    assert record.credentials.file == "codex/auth.json"
    assert {"OPENAI_API_KEY", "CODEX_API_KEY"} <= set(record.credentials.removed)
    assert record.scrub is not None and not record.scrub.failures
    found = record.scrub.by_name
    assert (
        found.get("openai-key")
        and found.get("OPENAI_API_KEY")
        and found.get("codex/auth.json:access_token")
    )

    # The agent really leaked: its files exist, now redacted; Harbor's overlay hid the keys.
    trial_dir = Path(trial.trial_dir)
    canary_log = (trial_dir / "agent" / "canary.log").read_text()
    assert "[REDACTED:" in canary_log
    assert '"OPENAI_API_KEY": true' in canary_log and '"CODEX_API_KEY": true' in canary_log
    notes = list(
        trial_dir.rglob("code_snapshot/leaked_notes.txt")
    )  # from /app, via the collect hook
    assert notes and all(
        "[REDACTED:openai-key]" in n.read_text() for n in trial_dir.rglob("leaked_notes.txt")
    )
    json.loads((trial_dir / "result.json").read_text())  # still valid JSON after the scrub

    # Nothing anywhere: every file of the run, binary included, and the console output.
    run_dir = record_path.parent
    files = [p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) > 20
    leaks = [
        (str(p.relative_to(run_dir)), c)
        for p in files
        for c in CANARIES
        if c.encode() in p.read_bytes()
    ]
    assert not leaks, leaks
    assert not any(c in output for c in CANARIES)
    task_dir = Path(record.task_dir)
    assert task_dir.is_dir() and not any(
        c.encode() in p.read_bytes() for p in task_dir.rglob("*") if p.is_file() for c in CANARIES
    )
