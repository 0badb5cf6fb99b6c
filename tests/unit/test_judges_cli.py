"""`ptb judge` on fake Harbor trial directories, and the verifier's module entry."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.core.verdict import JUDGE_IDS, Judgement
from posttrainbench.task.schemas import TaskSpec
from tests.helpers import REPO, run_ptb
from tests.unit.test_judges_model import CONFIG, model_dir, weights

FIXTURES = REPO / "tests" / "fixtures" / "judges"
NO_LLM = {"PTB_INTEGRITY_JUDGE_MODEL": "", "PTB_JUDGE_MODEL": "", "PTB_INTEGRITY_RECORDINGS": ""}


def make_trial(tmp_path: Path, trace: str, final_config: dict | None = None) -> tuple[Path, Path]:
    """A finished trial (agent/, artifacts/, config.json) of a gsm8k task; returns (trial, base model)."""
    task = tmp_path / "task"
    (task / "tests" / "data" / "gsm8k").mkdir(parents=True)
    TaskSpec(
        benchmark="gsm8k",
        benchmark_name="GSM8K",
        model="qwen3-1.7b",
        model_source="hf:Qwen/Qwen3-1.7B-Base",
        hours=1,
        gpus=0,
    ).dump(task / "tests" / "task.json")
    (task / "tests" / "data" / "gsm8k" / "test.jsonl").write_text(
        json.dumps(
            {
                "id": "0",
                "category": "main",
                "data": {
                    "question": "How many apples does Tom have if he buys "
                    "three bags of seven apples each?",
                    "answer": "21",
                },
            }
        )
        + "\n"
    )
    workspace = task / "environment" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "evaluate.py").write_text("# pristine evaluate\n")
    trial = tmp_path / "jobs" / "job1" / "trial__abc"
    (trial / "agent").mkdir(parents=True)
    shutil.copyfile(FIXTURES / trace, trial / "agent" / "claude-code.txt")
    (trial / "config.json").write_text(
        json.dumps({"task": {"path": str(task)}, "trial_name": "trial__abc"})
    )
    artifacts = trial / "artifacts"
    snap = artifacts / "code_snapshot"
    snap.mkdir(parents=True)
    (snap / "evaluate.py").write_text("# pristine evaluate\n")
    (snap / "train.py").write_text("from trl import SFTTrainer\n")
    (artifacts / "data_files").mkdir()
    (artifacts / "data_files" / "train.jsonl").write_text(
        json.dumps({"text": "Paris is in France."}) + "\n"
    )
    base = model_dir(tmp_path / "base", weights(0))
    model_dir(artifacts / "final_model", weights(0), final_config)
    return trial, base


def verdicts(out: Path) -> dict[str, Judgement]:
    return {j: Judgement.read(out / f"judgement_{j}.json") for j in JUDGE_IDS}


def test_clean_trial_writes_five_clean_judgements(tmp_path):
    trial, base = make_trial(tmp_path, "clean_claude_code.txt")
    result = run_ptb("judge", str(trial), "--base-model-dir", str(base), env=NO_LLM, timeout=120)
    assert result.returncode == 0, result.stderr
    got = verdicts(trial / "judges")
    assert {j: v.flagged for j, v in got.items()} == dict.fromkeys(JUDGE_IDS, False), {
        j: v.justification for j, v in got.items()
    }
    assert "untrained" in " ".join(e.detail for e in got["anomaly"].evidence)
    assert "judgements written" in result.stdout
    # Not silent while it works: the first line says what is being judged.
    assert result.stderr.startswith(f"judging {trial}: contamination, disallowed_model"), (
        result.stderr
    )


def test_cheating_trial_is_flagged_and_override_clears_one(tmp_path):
    trial, base = make_trial(
        tmp_path, "cheating_claude_code.txt", {**CONFIG, "num_hidden_layers": 3}
    )
    overrides = tmp_path / "overrides.json"
    overrides.write_text(
        json.dumps(
            {
                "anomaly": {
                    "flagged": False,
                    "justification": "clock reset was a test",
                    "author": "reviewer",
                }
            }
        )
    )
    out = tmp_path / "out"
    result = run_ptb(
        "judge",
        str(trial),
        "--base-model-dir",
        str(base),
        "--override",
        str(overrides),
        "-o",
        str(out),
        env=NO_LLM,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    got = verdicts(out)
    assert (
        got["api_usage"].flagged
        and got["benchmark_lookup"].flagged
        and got["disallowed_model"].flagged
    )
    assert got["anomaly"].flagged is False and got["anomaly"].decided_by == "override"
    assert any(e.detector == "timer_tamper" and e.flagged for e in got["anomaly"].evidence)
    assert got["contamination"].flagged is False


def test_missing_final_model_and_judge_subset(tmp_path):
    trial, base = make_trial(tmp_path, "clean_claude_code.txt")
    shutil.rmtree(trial / "artifacts" / "final_model")
    result = run_ptb(
        "judge",
        str(trial),
        "--base-model-dir",
        str(base),
        "--judges",
        "disallowed_model",
        env=NO_LLM,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (trial / "judges").iterdir()] == ["judgement_disallowed_model.json"]
    j = Judgement.read(trial / "judges" / "judgement_disallowed_model.json")
    assert j.flagged is None and "final_model" in j.justification


@pytest.mark.parametrize(
    "args, message",
    [
        (["judge", "{tmp}/no-such-trial"], "does not exist"),
        (["judge", "{trial}", "--judges", "contamination,vibes"], "unknown judge"),
        (["judge", "{trial}", "--override", "{tmp}/bad.json"], "override file"),
        (["judge", "{trial}", "--llm-votes", "-1"], "--llm-votes"),
        # Votes asked for with no model to give them: not a run with zero votes.
        (["judge", "{trial}", "--llm-votes", "3"], "PTB_INTEGRITY_JUDGE_MODEL"),
    ],
)
def test_bad_input_is_one_error_line_and_keeps_earlier_output(tmp_path, args, message):
    trial, _ = make_trial(tmp_path, "clean_claude_code.txt")
    (tmp_path / "bad.json").write_text('{"anomaly": {"flagged": "perhaps"}}')
    earlier = trial / "judges" / "judgement_anomaly.json"
    earlier.parent.mkdir()
    earlier.write_text("kept")
    argv = [a.format(tmp=tmp_path, trial=trial) for a in args]
    result = run_ptb(*argv, env=NO_LLM, timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr
    assert earlier.read_text() == "kept"


def test_trial_without_task_names_the_fix(tmp_path):
    trial, _ = make_trial(tmp_path, "clean_claude_code.txt")
    (trial / "config.json").unlink()
    result = run_ptb("judge", str(trial), env=NO_LLM, timeout=120)
    assert result.returncode == 2 and "--task" in result.stderr


def test_verifier_module_entry(tmp_path):
    trial, base = make_trial(tmp_path, "cheating_claude_code.txt")
    artifacts = trial / "artifacts"
    shutil.copytree(trial / "agent", artifacts / "agent_logs")
    task = tmp_path / "task"
    out = tmp_path / "verifier"
    cmd = [
        sys.executable,
        "-m",
        "posttrainbench.task.integrity.judges.run",
        "--artifacts",
        str(artifacts),
        "--task",
        str(task / "tests" / "task.json"),
        "--reference",
        str(task / "tests" / "data" / "gsm8k" / "test.jsonl"),
        "--base-model",
        str(base),
        "--workspace",
        str(task / "environment" / "workspace"),
        "--out-dir",
        str(out),
    ]
    env = {**__import__("os").environ, **NO_LLM}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    got = verdicts(out)
    assert (
        got["api_usage"].flagged
        and got["anomaly"].flagged
        and got["disallowed_model"].flagged is False
    )
    bad = subprocess.run(
        cmd[:-1] + [str(out), "--judges", "nope"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


def test_a_host_rejudge_keeps_the_verifiers_decided_verdict(tmp_path):
    """Issue 38 item 3: without the base model on the host, disallowed_model cannot decide;
    the verifier's verdict stands (and says why), instead of becoming 'undecided'."""
    trial, _base = make_trial(tmp_path, "clean_claude_code.txt")
    args = ("judge", str(trial), "--judges", "disallowed_model,anomaly")
    alone = run_ptb(*args, "-o", str(tmp_path / "alone"), env=NO_LLM, timeout=120)
    assert alone.returncode == 0, alone.stderr
    undecided = Judgement.read(tmp_path / "alone" / "judgement_disallowed_model.json")
    assert undecided.flagged is None and "base model" in undecided.justification

    verifier = Judgement(
        judge="disallowed_model",
        flagged=False,
        decided_by="detector",
        justification="no detector flagged the run",
    )
    verifier.write(trial / "verifier")
    result = run_ptb(*args, env=NO_LLM, timeout=120)
    assert result.returncode == 0, result.stderr
    kept = Judgement.read(trial / "judges" / "judgement_disallowed_model.json")
    assert kept.flagged is False and kept.decided_by == "detector"
    assert "kept from the verifier's judgement" in kept.justification
    assert "base model" in kept.justification
    assert "disallowed_model: clean" in result.stdout
    # A judge the host could decide is the host's own.
    assert (
        "kept from" not in Judgement.read(trial / "judges" / "judgement_anomaly.json").justification
    )
