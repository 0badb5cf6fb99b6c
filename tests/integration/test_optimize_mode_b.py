"""Mode B for real: nested Harbor jobs of a candidate agent class (from a git repo) over tiny
Harbor tasks on the local sandbox, through the evaluation service and directly (timeout
salvage, then a resume that re-runs only what did not count)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from posttrainbench.optimize import service as service_module
from posttrainbench.optimize.candidates import export_baseline
from posttrainbench.optimize.config import ScoringModeB, parse_config
from posttrainbench.optimize.errors import AgentTaskConfigError
from posttrainbench.optimize.nested_harbor import JOB_NAME, run_nested, work_dir_for
from posttrainbench.optimize.runas import CandidateUser
from posttrainbench.optimize.service import create_app
from posttrainbench.optimize.task_set import load_task_split
from tests.optimize_fixtures import commit

pytestmark = pytest.mark.slow

TASK_TOML = """\
version = "1.0"

[task]
name = "{name}"

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
"""

# The candidate: a Harbor agent class that knows some words, and stalls on 'slow' tasks.
AGENT = '''
import asyncio

from harbor.agents.base import BaseAgent


class CandidateAgent(BaseAgent):
    KNOWN = {"alpha", "beta"}

    @staticmethod
    def name() -> str:
        return "candidate"

    def version(self) -> str:
        return "1"

    async def setup(self, environment) -> None:
        pass

    async def run(self, instruction, environment, context) -> None:
        word = instruction.split("'")[1]
        if word.startswith("slow"):
            await asyncio.sleep(3600)
        answer = word if word in self.KNOWN else "dunno"
        await environment.exec(f"echo {answer} > /app/answer.txt")
'''


def write_task(root: Path, dirname: str, name: str, word: str) -> None:
    """A task whose verifier gives reward 1 when /app/answer.txt holds *word*."""
    task = root / "tasks" / dirname
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "task.toml").write_text(TASK_TOML.format(name=name))
    (task / "instruction.md").write_text(f"Write the word '{word}' to /app/answer.txt.\n")
    (task / "tests").mkdir()
    script = task / "tests" / "test.sh"
    script.write_text("#!/bin/bash\n"
                      f"if [ \"$(cat /app/answer.txt 2>/dev/null)\" = {word} ]; then\n"
                      "  echo 1 > /logs/verifier/reward.txt\n"
                      "else echo 0 > /logs/verifier/reward.txt; fi\n")
    script.chmod(0o755)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    data = tmp_path / "data"
    write_task(data, "alpha", "ptb-test/alpha", "alpha")
    write_task(data, "gamma", "ptb-test/gamma", "gamma")
    write_task(data, "slow", "ptb-test/slow", "slow")
    write_task(data, "beta", "ptb-test/beta", "beta")
    (data / "train.txt").write_text("ptb-test/alpha\nptb-test/gamma\n")
    (data / "dev.txt").write_text("ptb-test/alpha\nptb-test/gamma\nptb-test/slow\n")
    (data / "test.txt").write_text("ptb-test/beta\n")
    commit(tmp_path / "agent", {"agent.py": AGENT}, "candidate agent")
    return tmp_path


def config_for(root: Path, **scoring):
    return parse_config({
        "name": "harbor-toy", "baseline": "agent", "dataset": "data",
        "splits": {"train": {"tier": "viewable", "max_runs": 2}},
        "reward": {"mode": "auto_best", "selection_split": "train", "targets": [{"split": "test", "key": "reward"}]},
        "scoring": {"mode": "B", "agent_import_path": "agent:CandidateAgent", "n_concurrent": 2,
                    "nested_timeout_s": 240, **scoring},
    }, root)


def _me() -> CandidateUser:
    # The host interpreter lives where an unprivileged user cannot run it on this machine;
    # the user switch itself is covered by the Mode A tests.
    return CandidateUser(name="current")


def test_service_scores_a_commit_by_a_nested_harbor_run(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "candidate_user", lambda name: _me())
    config = config_for(world)
    state = world / "state"
    client = TestClient(create_app(state, config, agent_repo=world / "agent"))
    body = client.post("/eval", json={"commit": "HEAD", "split": "train"}).json()
    assert (body["tier"], body["n"], body["status"]) == ("viewable", 2, "ok"), body
    assert {s["id"]: s["score"] for s in body["samples"]} == {"ptb-test/alpha": 1.0, "ptb-test/gamma": 0.0}
    assert body["mean"] == 0.5 and body["budget"]["runs_left"] == 1
    # The hidden split's task never reached the service's copy.
    assert sorted(p.name for p in (state / "dataset" / "tasks").iterdir()) == ["alpha", "gamma"]
    # A split naming a task only by prefix is refused before anything runs.
    (world / "data" / "train.txt").write_text("ptb-test/alpha\nptb-test/gam\n")
    with pytest.raises(AgentTaskConfigError, match="no task is named exactly 'ptb-test/gam'"):
        load_task_split(world / "data", "train")


def test_timeout_salvages_finished_trials_and_resume_reruns_only_errored_ones(world: Path) -> None:
    tasks = load_task_split(world / "data", "dev")
    scoring = config_for(world).scoring
    assert isinstance(scoring, ScoringModeB)
    root = world / "nested"
    export = lambda dest: export_baseline(world / "agent", dest)  # noqa: E731

    report = run_nested(root, "candidate-1", "dev", export, tasks, scoring, _me(), timeout_s=45)
    assert report.status == "timeout", report.stderr_tail
    assert [(s.id, s.score, s.status) for s in report.samples] == [
        ("ptb-test/alpha", 1.0, "scored"), ("ptb-test/gamma", 0.0, "scored"), ("ptb-test/slow", 0.0, "missing")]
    assert report.missing == ["ptb-test/slow"] and report.mean == pytest.approx(1 / 3)

    job = work_dir_for(root, "candidate-1", "dev", tasks) / "jobs" / JOB_NAME
    trials = {json.loads((p / "result.json").read_text())["task_name"]: p.name
              for p in job.iterdir() if (p / "result.json").is_file()}
    # Plant an infrastructure error on gamma's (scored) trial: it no longer counts.
    result_path = job / trials["ptb-test/gamma"] / "result.json"
    result = json.loads(result_path.read_text())
    result["verifier_result"] = None
    result["exception_info"] = {"exception_type": "EnvironmentStartTimeoutError", "exception_message": "slow",
                                "exception_traceback": "", "occurred_at": result["finished_at"]}
    result_path.write_text(json.dumps(result))

    again = run_nested(root, "candidate-1", "dev", export, tasks, scoring, _me(), timeout_s=45)
    assert [(s.id, s.score) for s in again.samples] == [
        ("ptb-test/alpha", 1.0), ("ptb-test/gamma", 0.0), ("ptb-test/slow", 0.0)]
    now = {json.loads((p / "result.json").read_text())["task_name"]: p.name
           for p in job.iterdir() if (p / "result.json").is_file()}
    assert now["ptb-test/alpha"] == trials["ptb-test/alpha"]  # kept, not run again
    assert now["ptb-test/gamma"] != trials["ptb-test/gamma"]  # errored: run again
    retired = sorted(os.listdir(job.parent.parent / "retired"))
    assert trials["ptb-test/gamma"] in retired and trials["ptb-test/slow"] in retired
