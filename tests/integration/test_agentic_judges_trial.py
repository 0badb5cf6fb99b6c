"""PostTrainBench's agentic judges end to end, offline, in ONE real trial (to keep the
tier's time down): Codex does the demo task against the scripted model; in the verifier,
after our judges, the scripted judges (host/scripted_model/scripts/ptb_judges.yaml) run as
the real pinned CLIs in their sandbox: Codex's contamination vote and OpenCode's read
the trace and run PostTrainBench's contamination tool and write clean verdicts, and the
Codex API judge writes invalid JSON, which must leave it undecided."""

from __future__ import annotations

import asyncio
import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from posttrainbench.host.agent_check.run import run_check
from posttrainbench.host.results.harbor_trial import read_trial
from posttrainbench.host.scripted_model.script import Script, default_script, parse_script
from posttrainbench.task.integrity.agentic.config import (
    BASE_URL_ENV,
    KEY_ENV,
    MODEL_ENV,
    SECOND_MODEL_ENV,
)
from posttrainbench.task.integrity.agentic.verdicts import AgenticStatus
from tests.sandbox_support import requires_bwrap

pytestmark = [
    pytest.mark.slow,
    requires_bwrap,
    pytest.mark.skipif(shutil.which("npm") is None, reason="the agent CLIs install with npm"),
]


def _agent_then_judges() -> Script:
    judges = parse_script(
        resources.files("posttrainbench.host.scripted_model.scripts")
        .joinpath("ptb_judges.yaml")
        .read_text(),
        "ptb_judges.yaml",
    )
    # One conversation: the agent's turns first, then (in the verifier) the judges'.
    return Script(turns=[*default_script("codex").turns, *judges.turns], closing="Done.")


def _judge_env(url: str, key: str) -> dict[str, str]:
    return {
        MODEL_ENV: "gpt-5",
        SECOND_MODEL_ENV: "openai/gpt-5",
        KEY_ENV: key,
        BASE_URL_ENV: url,
    }


def test_both_cli_judges_run_in_the_verifier_and_invalid_json_is_undecided(
    tmp_path: Path,
) -> None:
    report = asyncio.run(
        run_check(
            "codex",
            script=_agent_then_judges(),
            runs_dir=tmp_path,
            limit=1,
            extra_env=_judge_env,
        )
    )
    (trial,) = [
        p for p in (Path(report.run_dir) / "jobs").glob("*/*") if (p / "result.json").is_file()
    ]
    verifier = trial / "verifier"
    log = (
        (verifier / "ptb_judges.log").read_text() if (verifier / "ptb_judges.log").exists() else ""
    )
    status = AgenticStatus.read(verifier / "ptb_judges.json")
    assert status.status == "ran", (status, log)
    runs = {r.name: r for r in status.judges}
    assert [r.cli for r in status.judges] == ["codex", "opencode", "codex"], log
    # both contamination votes decided clean, by the real CLIs, after running the tool
    for name in ("gpt5_4", "kimi"):
        assert runs[name].status == "decided" and runs[name].flagged() is False, (runs[name], log)
        output = (verifier / f"judge_output_{name}.json").read_text()
        assert "Contamination Check Results" in output and "contamination_check exit 0" in output
        assert (
            json.loads((verifier / f"judgement_{name}.json").read_text())["contamination"] is False
        )
    assert "=== Event" in (verifier / "judge_output_gpt5_4.json").read_text()  # read the trace
    # the API judge wrote invalid JSON: undecided, never clean, no verdict file
    assert runs["api"].status == "undecided" and "not valid JSON" in (runs["api"].reason or "")
    assert not (verifier / "judgement_api.json").exists()
    result = json.loads((verifier / "judge_result.json").read_text())
    assert result["contamination"] is False and result["disallowed_model"] is False
    assert result["disallowed_api_usage"] is None
    # beside our own judges, never instead; the check's other stages still pass (the key
    # given to the judges, the check's canary, is in no file of the run)
    assert (verifier / "judgement_contamination.json").is_file()
    # (not "trace parsed" nor "judges": they look for the judges' commands in the agent's trace)
    stages = {s.stage: s for s in report.stages}
    for stage in (
        "auth",
        "agent run",
        "final_model handed off",
        "verifier reward",
        "secrets scrubbed",
    ):
        assert stages[stage].ok, "\n".join(f"{s.stage}: {s.ok} {s.detail}" for s in report.stages)
    # the results store reads them for the report's run page
    record = read_trial(trial).record
    assert record.ptb_judges is not None and record.ptb_judges.result is not None
