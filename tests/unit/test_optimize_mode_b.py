"""Mode B without a nested run: config, exact task-name matching, per-task selection and
aggregation on trial results written with Harbor's own models, resume and timeout plumbing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from harbor.models.job.config import JobConfig
from harbor.models.task.id import LocalTaskId
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from harbor.models.trial.result import AgentInfo, ExceptionInfo, TrialResult
from harbor.models.verifier.result import VerifierResult

from posttrainbench.service.api.scoring import check_scoring_dataset, copy_evaluable, load_samples
from posttrainbench.service.mode_b import nested_harbor
from posttrainbench.service.mode_b.proxy_agent import CandidateSpec
from posttrainbench.service.mode_b.task_set import TaskSample, load_task_split
from posttrainbench.service.mode_b.trial_selection import build_report, read_trials, trials_to_retry
from posttrainbench.service.shared.candidates import directory_source
from posttrainbench.service.shared.config import (
    AgentTaskConfig,
    CandidateLimits,
    ScoringModeA,
    ScoringModeB,
    parse_config,
)
from posttrainbench.service.shared.errors import AgentTaskConfigError
from posttrainbench.service.shared.identity import IdentityPool

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def write_task(root: Path, dirname: str, name: str | None) -> Path:
    """A minimal valid Harbor task dir (enough for task.toml parsing and copying)."""
    task = root / "tasks" / dirname
    (task / "tests").mkdir(parents=True)
    section = f'[task]\nname = "{name}"\n\n' if name else ""
    (task / "task.toml").write_text(f'version = "1.0"\n\n{section}[agent]\ntimeout_sec = 60.0\n')
    (task / "instruction.md").write_text("do it\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return task


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for dirname, name in [
        ("a", "org/alpha"),
        ("b", "org/beta"),
        ("ab", "org/alpha-beta"),
        ("c", "other/alpha"),
    ]:
        write_task(root, dirname, name)
    (root / "train.txt").write_text("# training tasks\norg/alpha\n\norg/beta\n")
    (root / "test.jsonl").write_text('{"id": "org/alpha-beta"}\n{"id": "other/alpha"}\n')
    return root


def mode_b_config(tmp_path: Path, data: Path, **scoring) -> AgentTaskConfig:
    (tmp_path / "baseline").mkdir(exist_ok=True)
    raw = {
        "name": "harbor-toy",
        "baseline": "baseline",
        "dataset": str(data.relative_to(tmp_path)),
        "splits": {"train": {"tier": "viewable", "max_runs": 3}},
        "reward": {
            "mode": "auto_best",
            "selection_split": "train",
            "targets": [{"split": "test", "key": "reward"}],
        },
        "scoring": {"mode": "B", "agent_import_path": "agent:CandidateAgent", **scoring},
    }
    return parse_config(raw, tmp_path)


# -- config -------------------------------------------------------------------------------


def test_mode_b_config_parses_and_old_configs_stay_mode_a(tmp_path, data):
    config = mode_b_config(
        tmp_path, data, n_attempts=3, aggregation="mean", retry={"max_retries": 2}
    )
    assert isinstance(config.scoring, ScoringModeB)
    assert (
        config.scoring.n_attempts,
        config.scoring.aggregation,
        config.scoring.retry.max_retries,
    ) == (3, "mean", 2)
    assert (
        config.scoring.environment
        == "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
    )
    legacy = AgentTaskConfig.model_validate(
        {
            "name": "x",
            "baseline": "b",
            "dataset": "d",
            "splits": {},
            "reward": {"mode": "submit", "targets": [{"split": "test", "key": "r"}]},
            "scoring": {"entry_command": "python3 solve.py"},
        }
    )
    assert isinstance(legacy.scoring, ScoringModeA) and legacy.scoring.mode == "A"


@pytest.mark.parametrize(
    "scoring, fragment",
    [
        ({"agent_import_path": "agent.CandidateAgent"}, "agent_import_path"),
        ({"aggregation": "median"}, "aggregation"),
        ({"n_attempts": 0}, "n_attempts"),
        ({"retry": {"max_retries": 1, "tries": 3}}, "tries"),
        ({"entry_command": "python3 solve.py"}, "entry_command"),
    ],
)
def test_bad_mode_b_config_is_one_line_error(tmp_path, data, scoring, fragment):
    with pytest.raises(AgentTaskConfigError, match=fragment) as caught:
        mode_b_config(tmp_path, data, **scoring)
    assert "\n" not in str(caught.value)


def test_pass_env_may_not_carry_secrets_in_mode_b(tmp_path, data):
    with pytest.raises(AgentTaskConfigError, match="secrets"):
        parse_config(
            {
                **mode_b_config(tmp_path, data).model_dump(mode="json"),
                "secrets": ["KEY"],
                "scoring": {"mode": "B", "agent_import_path": "a:B", "pass_env": ["KEY"]},
            },
            tmp_path,
        )


# -- exact task names ---------------------------------------------------------------------


def test_splits_match_task_names_exactly(tmp_path, data):
    assert [t.name for t in load_task_split(data, "train")] == ["org/alpha", "org/beta"]
    assert [t.path.name for t in load_task_split(data, "test")] == ["ab", "c"]
    config = mode_b_config(tmp_path, data)
    assert check_scoring_dataset(config) == {"train": 2, "test": 2}
    assert [s.id for s in load_samples(config, data, "test")] == ["org/alpha-beta", "other/alpha"]


@pytest.mark.parametrize("ids", ["alpha", "org/alph", "org/*", "org/alpha*", "ORG/alpha", "a"])
def test_split_id_without_an_exact_task_is_refused(data, ids):
    (data / "train.txt").write_text(f"org/beta\n{ids}\n")
    with pytest.raises(AgentTaskConfigError, match="no task is named exactly"):
        load_task_split(data, "train")


def test_duplicate_names_and_ids_and_missing_sections_are_refused(data):
    (data / "train.txt").write_text("org/alpha\norg/alpha\n")
    with pytest.raises(AgentTaskConfigError, match="duplicate task 'org/alpha'"):
        load_task_split(data, "train")
    (data / "train.txt").write_text("org/alpha\n")
    write_task(data, "z", "org/alpha")
    with pytest.raises(AgentTaskConfigError, match="used by both"):
        load_task_split(data, "train")
    (data / "tasks" / "z" / "task.toml").write_text('version = "1.0"\n')
    with pytest.raises(AgentTaskConfigError, match=r"\[task\] section"):
        load_task_split(data, "train")


def test_service_copy_holds_only_evaluable_tasks(tmp_path, data):
    copy_evaluable(mode_b_config(tmp_path, data), tmp_path / "copy", ["train"])
    assert sorted(p.name for p in (tmp_path / "copy" / "tasks").iterdir()) == ["a", "b"]
    assert not (tmp_path / "copy" / "test.jsonl").exists()
    assert [t.name for t in load_task_split(tmp_path / "copy", "train")] == [
        "org/alpha",
        "org/beta",
    ]


# -- selection and aggregation on Harbor trial results ------------------------------------


def write_trial(
    job_dir: Path,
    task: str,
    reward: float | None,
    minutes: int,
    error: str | None = None,
    rewards: dict | None = None,
) -> Path:
    """One trial dir with a result.json exactly as Harbor writes it."""
    trial_id = uuid.uuid4()
    name = f"{task.split('/')[-1]}__{str(trial_id)[:7]}"
    trial = job_dir / name
    trial.mkdir(parents=True)
    path = Path(f"/nonexistent/tasks/{task.split('/')[-1]}")
    finished = T0 + timedelta(minutes=minutes)
    verifier = None
    if rewards is not None or reward is not None:
        verifier = VerifierResult(rewards=rewards if rewards is not None else {"reward": reward})
    exception = (
        None
        if error is None
        else ExceptionInfo(
            exception_type=error,
            exception_message="boom",
            exception_traceback="",
            occurred_at=finished,
        )
    )
    result = TrialResult(
        id=trial_id,
        task_name=task,
        trial_name=name,
        trial_uri=f"file://{trial}",
        task_id=LocalTaskId(path=path),
        task_checksum="0" * 64,
        config=TrialConfig(
            task=TaskConfig(path=path),
            trial_name=name,
            agent=AgentConfig(import_path="agent:CandidateAgent"),
        ),
        agent_info=AgentInfo(name="candidate", version="1"),
        verifier_result=verifier,
        exception_info=exception,
        started_at=finished - timedelta(minutes=1),
        finished_at=finished,
    )
    (trial / "result.json").write_text(result.model_dump_json(indent=2))
    return trial


NAMES = ["org/alpha", "org/beta", "org/gamma"]


@pytest.fixture
def job(tmp_path) -> Path:
    job = tmp_path / "jobs" / "nested"
    write_trial(job, "org/alpha", 0.5, minutes=1)
    write_trial(job, "org/alpha", 1.0, minutes=2)
    write_trial(
        job, "org/alpha", None, minutes=9, error="EnvironmentStartTimeoutError"
    )  # errored: no reward
    write_trial(job, "org/beta", 0.25, minutes=3)
    write_trial(job, "org/beta", 0.0, minutes=8)
    write_trial(job, "org/alpha-beta", 1.0, minutes=4)  # another task: a prefix never matches
    write_trial(
        job, "org/gamma", None, minutes=5, error="CancelledError"
    )  # cancelled by the timeout
    (job / "unfinished__x").mkdir()  # no result.json yet
    return job


def test_best_trial_per_task_by_reward_and_missing_tasks_score_zero(job):
    report = build_report(NAMES, read_trials(job, "reward"), "best", 3, "timeout", None, 1.0, "")
    by_id = {s.id: s for s in report.samples}
    assert [s.id for s in report.samples] == NAMES
    assert (by_id["org/alpha"].score, by_id["org/beta"].score, by_id["org/gamma"].score) == (
        1.0,
        0.25,
        0.0,
    )
    assert by_id["org/alpha"].trials == 2 and by_id["org/gamma"].status == "missing"
    assert report.missing == ["org/gamma"] and report.correct == 1
    assert report.mean == pytest.approx((1.0 + 0.25 + 0.0) / 3) and report.status == "timeout"


def test_equal_rewards_pick_the_most_recent_trial(tmp_path):
    job = tmp_path / "job"
    write_trial(job, "org/alpha", 1.0, minutes=1)
    late = write_trial(job, "org/alpha", 1.0, minutes=7)
    write_trial(job, "org/alpha", 1.0, minutes=3)
    (sample,) = build_report(
        ["org/alpha"], read_trials(job, "reward"), "best", 3, "ok", 0, 1.0, ""
    ).samples
    assert sample.chosen_trial == late.name


def test_mean_aggregation_averages_attempts_with_unfinished_ones_at_zero(job):
    report = build_report(NAMES, read_trials(job, "reward"), "mean", 3, "ok", 0, 1.0, "")
    scores = [s.score for s in report.samples]
    assert scores == pytest.approx([(0.5 + 1.0) / 3, 0.25 / 3, 0.0])
    assert report.mean == pytest.approx(sum(scores) / 3)


def test_reward_key_and_invalid_rewards(tmp_path):
    job = tmp_path / "job"
    write_trial(job, "org/alpha", None, minutes=1, rewards={"accuracy": 0.75})
    write_trial(
        job, "org/beta", 1.0, minutes=1, error="RewardFileNotFoundError"
    )  # policy: reward not valid
    assert [
        s.score
        for s in build_report(
            ["org/alpha", "org/beta"], read_trials(job, "accuracy"), "best", 1, "ok", 0, 1.0, ""
        ).samples
    ] == [0.75, 0.0]
    assert build_report(
        ["org/alpha"], read_trials(job, "reward"), "best", 1, "ok", 0, 1.0, ""
    ).missing == ["org/alpha"]


def test_resume_retires_only_infra_and_verifier_failures(job, tmp_path):
    # The candidate's own error does not count, but is its result: never run again.
    write_trial(job, "org/beta", None, minutes=6, error="ApiRateLimitError")
    errored = sorted(p.name for p in trials_to_retry(job, "reward"))
    assert len(errored) == 2 and {n.split("__")[0] for n in errored} == {"alpha", "gamma"}
    kept = sorted(p.name for p in job.iterdir() if p.name not in errored)
    moved = nested_harbor.retire(trials_to_retry(job, "reward"), tmp_path / "retired")
    assert (
        sorted(p.name for p in moved) == errored and sorted(p.name for p in job.iterdir()) == kept
    )
    assert trials_to_retry(job, "reward") == []


# -- the nested job's config and process control ------------------------------------------


def test_job_config_passes_attempts_retries_and_concurrency(tmp_path):
    scoring = ScoringModeB(
        mode="B",
        agent_import_path="agent:CandidateAgent",
        agent_model="m/x",
        n_attempts=4,
        n_concurrent=2,
        retry={"max_retries": 3, "include_exceptions": ["AgentTimeoutError"]},
        agent_kwargs={"temperature": 0},
        pass_env=["LANGUAGE"],
    )
    tasks = [
        TaskSample(name="org/alpha", path=tmp_path / "a"),
        TaskSample(name="org/beta", path=tmp_path / "b"),
    ]
    pool = IdentityPool(tmp_path / "identities.json")
    config = nested_harbor.job_config(
        scoring, tmp_path / "work", tasks, CandidateLimits(max_processes=99), pool
    )
    assert isinstance(config, JobConfig) and config.job_name == "nested"
    assert config.jobs_dir == tmp_path / "work" / "jobs"
    assert (config.n_attempts, config.n_concurrent_trials, config.retry.max_retries) == (4, 2, 3)
    assert config.retry.include_exceptions == {"AgentTimeoutError"}
    assert config.retry.exclude_exceptions  # Harbor's default exclusions are kept
    # The nested job's agent is the trusted proxy; the candidate class is only named in its kwargs.
    (agent,) = config.agents
    assert (agent.import_path, agent.model_name) == (nested_harbor.PROXY_IMPORT_PATH, None)
    spec = CandidateSpec.model_validate(agent.kwargs["candidate"])
    assert (spec.import_path, spec.model_name, spec.kwargs) == (
        "agent:CandidateAgent",
        "m/x",
        {"temperature": 0},
    )
    assert (spec.code_dir, spec.host_dir) == (
        tmp_path / "work" / "code",
        tmp_path / "work" / "agents",
    )
    assert (spec.identity_pool, spec.limits.max_processes, spec.pass_env) == (
        pool.path,
        99,
        ["LANGUAGE"],
    )
    assert spec.python == sys.executable  # agent_python unset: the service's own interpreter
    assert [t.path for t in config.tasks] == [
        tmp_path / "work" / "tasks" / "a",
        tmp_path / "work" / "tasks" / "b",
    ]
    assert (
        config.environment.import_path
        == "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
    )
    # The same task set, in any order, resumes the same directory; another set gets its own.
    same = nested_harbor.work_dir_for(tmp_path, "candidate-1", "train", tasks[::-1])
    assert same == nested_harbor.work_dir_for(tmp_path, "candidate-1", "train", tasks)
    assert same != nested_harbor.work_dir_for(tmp_path, "candidate-1", "train", tasks[:1])


def test_nested_job_env_is_the_services_and_prepare_keeps_the_candidate_out(
    tmp_path, monkeypatch, data
):
    monkeypatch.setenv("PTB_TEST_SERVICE_SECRET", "s3cret")
    assert nested_harbor.child_env()["PTB_TEST_SERVICE_SECRET"] == "s3cret"
    assert nested_harbor.child_env()["HARBOR_TELEMETRY"] == "0"
    scoring = ScoringModeB(mode="B", agent_import_path="agent:CandidateAgent")
    tasks = load_task_split(data, "train")
    root = tmp_path / "nested"
    work = nested_harbor.work_dir_for(root, "candidate-1", "train", tasks)

    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "agent.py").write_text("x = 1\n")
    config_file, retired = nested_harbor.prepare(
        root,
        work,
        directory_source(code),
        tasks,
        scoring,
        CandidateLimits(),
        IdentityPool(tmp_path / "identities.json"),
    )
    assert retired == [] and config_file == work / "job.json"
    modes = {
        name: stat.S_IMODE(os.stat(work / name).st_mode)
        for name in ("tasks", "jobs", "agents", "code")
    }
    assert modes == {"tasks": 0o700, "jobs": 0o700, "agents": 0o711, "code": 0o755}
    assert (
        stat.S_IMODE(os.stat(work).st_mode) == 0o711
        and stat.S_IMODE(os.stat(config_file).st_mode) == 0o600
    )
    assert stat.S_IMODE(os.stat(work / "code" / "pkg" / "agent.py").st_mode) & 0o444 == 0o444
    assert sorted(p.name for p in (work / "tasks").iterdir()) == ["a", "b"]


def test_timeout_terminates_the_nested_process_group(monkeypatch):
    monkeypatch.setattr(nested_harbor, "TERM_GRACE_S", 5.0)
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    assert nested_harbor._wait(proc, 0.2) == ("timeout", None)
    assert proc.poll() is not None
    assert nested_harbor._wait(subprocess.Popen(["true"], start_new_session=True), 10) == ("ok", 0)
    assert nested_harbor._wait(subprocess.Popen(["false"], start_new_session=True), 10) == (
        "error",
        1,
    )


def test_mode_b_example_config_loads_with_its_tasks():
    from posttrainbench.service.api.scoring import load_config

    repo = Path(__file__).resolve().parents[2]
    config = load_config(repo / "examples" / "agent-task-harbor" / "task.yaml")
    assert (
        isinstance(config.scoring, ScoringModeB)
        and config.scoring.agent_import_path == "agent:CandidateAgent"
    )
    assert check_scoring_dataset(config) == {"train": 2, "test": 2}


@pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: only a root service switches to a fresh uid"
)
def test_a_candidate_uid_that_cannot_start_the_agent_host_stops_the_service_with_one_line(
    tmp_path, data
):
    from posttrainbench.service.api.service import create_app
    from posttrainbench.service.mode_b.proxy_agent import check_agent_host
    from posttrainbench.service.shared.errors import ServiceStateError

    config = mode_b_config(tmp_path, data, agent_python=str(tmp_path / "no-such-python"))
    with pytest.raises(ServiceStateError, match="cannot start the Mode B agent host") as raised:
        check_agent_host(config.scoring, config.limits, IdentityPool(tmp_path / "identities.json"))
    assert "\n" not in str(raised.value) and "agent_python" in str(raised.value)
    with pytest.raises(ServiceStateError, match="agent_python"):  # the service refuses to start
        create_app(tmp_path / "state", config, agent_repo=tmp_path / "baseline")
