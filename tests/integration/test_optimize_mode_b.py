"""Mode B for real: nested Harbor jobs of a candidate agent class (from a git repo) over tiny
Harbor tasks on the local sandbox, the class running behind the trusted proxy: through the
evaluation service, directly (timeout salvage, then a resume that re-runs only what did not
count), and as fresh unprivileged uids with a candidate that tries to forge its score."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from posttrainbench.service.api.service import create_app
from posttrainbench.service.mode_b.nested_harbor import JOB_NAME, run_nested, work_dir_for
from posttrainbench.service.mode_b.task_set import load_task_split
from posttrainbench.service.shared.candidates import baseline_source
from posttrainbench.service.shared.config import CandidateLimits, ScoringModeB, parse_config
from posttrainbench.service.shared.errors import AgentTaskConfigError
from posttrainbench.service.shared.identity import IdentityPool, processes_of
from tests.optimize_fixtures import commit, needs_root

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
AGENT = """
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
"""


def write_task(root: Path, dirname: str, name: str, word: str) -> None:
    """A task whose verifier gives reward 1 when /app/answer.txt holds *word*."""
    task = root / "tasks" / dirname
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "task.toml").write_text(TASK_TOML.format(name=name))
    (task / "instruction.md").write_text(f"Write the word '{word}' to /app/answer.txt.\n")
    (task / "tests").mkdir()
    script = task / "tests" / "test.sh"
    script.write_text(
        "#!/bin/bash\n"
        f'if [ "$(cat /app/answer.txt 2>/dev/null)" = {word} ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt\n"
        "else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    script.chmod(0o755)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
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
    return parse_config(
        {
            "name": "harbor-toy",
            "baseline": "agent",
            "dataset": "data",
            "splits": {"train": {"tier": "viewable", "max_runs": 2}},
            "reward": {
                "mode": "auto_best",
                "selection_split": "train",
                "targets": [{"split": "test", "key": "reward"}],
            },
            "scoring": {
                "mode": "B",
                "agent_import_path": "agent:CandidateAgent",
                "n_concurrent": 2,
                "nested_timeout_s": 240,
                **scoring,
            },
        },
        root,
    )


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory the candidate user can traverse (pytest's tmp dirs are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ptb-mode-b-"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def runnable_python(dest: Path) -> tuple[Path, Path]:
    """A copy of this interpreter an unprivileged user can run (the test venv's lives under
    /root), hard-linked where possible; return (python, the dir of its libpython)."""
    base, name = Path(sys.base_prefix), f"python{sys.version_info.major}.{sys.version_info.minor}"
    (dest / "bin").mkdir(parents=True)
    (dest / "lib").mkdir()
    _link_or_copy(str(base / "bin" / name), str(dest / "bin" / name))
    for lib in (base / "lib").glob("libpython*.so*"):
        _link_or_copy(str(lib), str(dest / "lib" / lib.name))
    shutil.copytree(
        base / "lib" / name,
        dest / "lib" / name,
        copy_function=_link_or_copy,
        ignore=shutil.ignore_patterns("test", "idlelib", "tkinter"),
    )
    return dest / "bin" / name, dest / "lib"


@pytest.fixture
def runnable(public_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Scoring settings under which a root service's fresh candidate uids can start the agent host."""
    python, libdir = runnable_python(public_dir / "python")
    monkeypatch.setenv(
        "LD_LIBRARY_PATH", str(libdir)
    )  # its libpython is found by an absolute runpath
    return {"agent_python": str(python), "pass_env": ["LD_LIBRARY_PATH"]}


def test_service_scores_a_commit_by_a_nested_harbor_run(
    world: Path, public_dir: Path, runnable: dict
) -> None:
    config = config_for(world, **runnable)
    state = public_dir / "state"
    client = TestClient(create_app(state, config, agent_repo=world / "agent"))
    body = client.post("/eval", json={"commit": "HEAD", "split": "train"}).json()
    assert (body["tier"], body["n"], body["status"]) == ("viewable", 2, "ok"), body
    assert {s["id"]: s["score"] for s in body["samples"]} == {
        "ptb-test/alpha": 1.0,
        "ptb-test/gamma": 0.0,
    }
    assert body["mean"] == 0.5 and body["budget"]["runs_left"] == 1
    # The nested job ran the trusted proxy; Harbor recorded the candidate's class behind it.
    (job,) = (state.parent / f"{state.name}.nested").glob(f"eval/*/train/*/jobs/{JOB_NAME}")
    results = [json.loads(p.read_text()) for p in job.glob("*/result.json")]
    assert len(results) == 2 and {r["agent_info"]["name"] for r in results} == {"candidate"}
    assert {r["config"]["agent"]["import_path"] for r in results} == {
        "posttrainbench.service.mode_b.proxy_agent:CandidateProxyAgent"
    }
    assert all(
        (p.parent / "agent" / "candidate-host.log").is_file() for p in job.glob("*/result.json")
    )
    # The hidden split's task never reached the service's copy.
    assert sorted(p.name for p in (state / "dataset" / "tasks").iterdir()) == ["alpha", "gamma"]
    # A split naming a task only by prefix is refused before anything runs.
    (world / "data" / "train.txt").write_text("ptb-test/alpha\nptb-test/gam\n")
    with pytest.raises(AgentTaskConfigError, match="no task is named exactly 'ptb-test/gam'"):
        load_task_split(world / "data", "train")


def test_timeout_salvages_finished_trials_and_resume_reruns_only_errored_ones(
    world: Path, public_dir: Path, runnable: dict
) -> None:
    tasks = load_task_split(world / "data", "dev")
    scoring = config_for(world, **runnable).scoring
    assert isinstance(scoring, ScoringModeB)
    root = public_dir / "nested"
    source = baseline_source(world / "agent")
    pool = IdentityPool(public_dir / "identities.json")

    report = run_nested(
        root, "candidate-1", "dev", source, tasks, scoring, CandidateLimits(), pool, timeout_s=45
    )
    assert report.status == "timeout", report.stderr_tail
    assert [(s.id, s.score, s.status) for s in report.samples] == [
        ("ptb-test/alpha", 1.0, "scored"),
        ("ptb-test/gamma", 0.0, "scored"),
        ("ptb-test/slow", 0.0, "missing"),
    ]
    assert report.missing == ["ptb-test/slow"] and report.mean == pytest.approx(1 / 3)

    job = work_dir_for(root, "candidate-1", "dev", tasks) / "jobs" / JOB_NAME
    trials = {
        json.loads((p / "result.json").read_text())["task_name"]: p.name
        for p in job.iterdir()
        if (p / "result.json").is_file()
    }
    # Plant an infrastructure error on gamma's (scored) trial: it no longer counts.
    result_path = job / trials["ptb-test/gamma"] / "result.json"
    result = json.loads(result_path.read_text())
    result["verifier_result"] = None
    result["exception_info"] = {
        "exception_type": "EnvironmentStartTimeoutError",
        "exception_message": "slow",
        "exception_traceback": "",
        "occurred_at": result["finished_at"],
    }
    result_path.write_text(json.dumps(result))

    again = run_nested(
        root, "candidate-1", "dev", source, tasks, scoring, CandidateLimits(), pool, timeout_s=45
    )
    assert [(s.id, s.score) for s in again.samples] == [
        ("ptb-test/alpha", 1.0),
        ("ptb-test/gamma", 0.0),
        ("ptb-test/slow", 0.0),
    ]
    now = {
        json.loads((p / "result.json").read_text())["task_name"]: p.name
        for p in job.iterdir()
        if (p / "result.json").is_file()
    }
    assert now["ptb-test/alpha"] == trials["ptb-test/alpha"]  # kept, not run again
    assert now["ptb-test/gamma"] != trials["ptb-test/gamma"]  # errored: run again
    retired = sorted(os.listdir(job.parent.parent / "retired"))
    assert trials["ptb-test/gamma"] in retired and trials["ptb-test/slow"] in retired


# A candidate that answers 'alpha' right and everything else wrong, and meanwhile tries every
# way around the verifier it can reach from its own process.
FORGER = r'''
import json, os, subprocess, sys
from pathlib import Path

from harbor.agents.base import BaseAgent

LATE = """
import pathlib, sys, time
time.sleep(4)
try:
    (pathlib.Path(sys.argv[1]) / "result.json").write_text('{"reward": 1}')
    outcome = "done"
except Exception as exc:
    outcome = type(exc).__name__
(pathlib.Path.home() / "late.txt").write_text(outcome)
"""


def attempt(report, key, action):
    try:
        action()
        report[key] = "done"
    except Exception as exc:
        report[key] = type(exc).__name__


class CandidateAgent(BaseAgent):
    def __init__(self, *args, probe="", **kwargs):
        super().__init__(*args, **kwargs)
        self.probe = probe

    @staticmethod
    def name():
        return "forger"

    def version(self):
        return "1"

    async def setup(self, environment):
        pass

    async def run(self, instruction, environment, context):
        report = {"uid": os.getuid(), "secret_in_env": "PTB_TEST_SERVICE_SECRET" in os.environ}
        work = Path.cwd().parents[2]  # <work>/agents/<trial>/home
        trial = work / "jobs" / "nested" / self.session_id.removesuffix("__agent")
        attempt(report, "list_jobs", lambda: os.listdir(work / "jobs"))
        attempt(report, "result_json", lambda: (trial / "result.json").write_text('{"reward": 1}'))
        attempt(report, "reward_file", lambda: (trial / "verifier" / "reward.txt").write_text("1"))
        attempt(report, "job_config", lambda: (work / "job.json").write_text("{}"))
        attempt(report, "own_code", lambda: (work / "code" / "agent.py").write_text("# replaced"))
        attempt(report, "read_tasks", lambda: os.listdir(work / "tasks"))
        attempt(report, "read_state", lambda: Path(self.probe).read_text())
        try:  # the file is read here, as this user: the proxy opens no host path for us
            await environment.upload_file(self.probe, "/app/stolen")
            report["upload_state"] = "done"
        except Exception as exc:
            report["upload_state"] = type(exc).__name__
        import harbor.verifier.verifier as verifier

        async def always_one(self):
            raise SystemExit("patched")

        verifier.Verifier.verify = always_one  # only this process's copy
        word = instruction.split("'")[1]
        answer = word if word == "alpha" else "wrong"
        # In the task environment: a reward file that the verifier's own run replaces.
        await environment.exec(f"echo 1 > /logs/verifier/reward.txt; echo {answer} > /app/answer.txt")
        subprocess.Popen([sys.executable, "-c", LATE, str(trial)], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (self.logs_dir / "forge.json").write_text(json.dumps(report))
        context.n_input_tokens = 7
        context.metadata = {"forge": report}
'''


@needs_root
def test_forging_candidate_as_a_fresh_uid_gets_only_what_the_verifier_gave(
    world: Path, public_dir: Path, runnable: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(world / "agent", {"agent.py": FORGER}, "forging agent")
    monkeypatch.setenv("PTB_TEST_SERVICE_SECRET", "s3cret")  # the service's: the nested job has it
    state = public_dir / "state"
    state.mkdir(mode=0o700)
    (state / "token").write_text("admin token")
    scoring = config_for(world, **runnable, agent_kwargs={"probe": str(state / "token")}).scoring
    assert isinstance(scoring, ScoringModeB)
    tasks = load_task_split(world / "data", "train")  # alpha (answered right), gamma (wrong)
    root = public_dir / "nested"
    pool = IdentityPool(state / "identities.json")

    report = run_nested(
        root,
        "forger",
        "train",
        baseline_source(world / "agent"),
        tasks,
        scoring,
        CandidateLimits(),
        pool,
        timeout_s=240,
    )
    assert report.status == "ok", report.stderr_tail
    assert [(s.id, s.score, s.status) for s in report.samples] == [
        ("ptb-test/alpha", 1.0, "scored"),
        ("ptb-test/gamma", 0.0, "scored"),
    ]

    job = work_dir_for(root, "forger", "train", tasks) / "jobs" / JOB_NAME
    trials = sorted(p.parent for p in job.glob("*/result.json"))
    assert len(trials) == 2
    denied = {
        "list_jobs",
        "result_json",
        "reward_file",
        "job_config",
        "own_code",
        "read_tasks",
        "read_state",
        "upload_state",
    }
    for trial in trials:
        result = json.loads((trial / "result.json").read_text())
        forge = json.loads((trial / "agent" / "forge.json").read_text())
        assert forge["uid"] in pool.issued() and forge["secret_in_env"] is False
        assert {key: forge[key] for key in denied} == {key: "PermissionError" for key in denied}
        assert result["agent_info"]["name"] == "forger"
        assert (
            result["agent_result"]["n_input_tokens"] == 7
            and result["agent_result"]["metadata"]["forge"] == forge
        )
        expected = 1 if result["task_name"] == "ptb-test/alpha" else 0
        assert result["verifier_result"]["rewards"] == {"reward": expected}
    # Each trial had its own uid; the process that left the agent's process group to retry
    # later was killed with its uid when the trial ended, before it could try.
    assert len({json.loads((t / "agent" / "forge.json").read_text())["uid"] for t in trials}) == 2
    assert all(processes_of(uid) == [] for uid in pool.issued())  # so late.txt can never appear
    # Its private dirs went with it (their logs were copied into the trial first).
    assert list((job.parent.parent / "agents").iterdir()) == []
    assert all((t / "agent" / "candidate-host.log").is_file() for t in trials)
