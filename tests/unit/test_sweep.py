"""`ptb sweep`: the matrix, the sweep directory, the lock, the retry policy and the status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.host.sweep.plan import LEGACY_JOB_NAME, default_sweep_dir, open_sweep_dir
from posttrainbench.host.sweep.runner import retire, sweep_lock, trials_to_retry
from posttrainbench.host.sweep.spec import AgentChoice, SweepError, SweepSpec, parse_agents
from posttrainbench.host.sweep.status import sweep_status
from tests.helpers import run_ptb
from tests.results_fixtures import TrialSpec, write_trial


def _spec(**kw) -> SweepSpec:
    base = dict(
        benchmarks=["gsm8k", "bfcl"],
        models=["qwen3-1.7b"],
        agents=parse_agents("claude-code:anthropic/claude-opus-4-1,codex:openai/gpt-5"),
        attempts=2,
    )
    return SweepSpec(**{**base, **kw})


def test_agents_parse_names_models_and_import_paths() -> None:
    assert parse_agents("claude-code:anthropic/claude-opus-4-1, nop") == [
        AgentChoice(agent="claude-code", model="anthropic/claude-opus-4-1"),
        AgentChoice(agent="nop"),
    ]
    assert parse_agents("tests.canary_agent:CanaryAgent:openai/gpt-5") == [
        AgentChoice(agent="tests.canary_agent:CanaryAgent", model="openai/gpt-5")
    ]
    for bad in ("", ",", "nop,nop", ":model"):
        with pytest.raises(SweepError):
            parse_agents(bad)


def test_same_command_same_directory_and_a_different_matrix_is_refused(tmp_path: Path) -> None:
    spec = _spec()
    assert spec.n_trials == 2 * 1 * 2 * 2
    assert default_sweep_dir(spec, None) == default_sweep_dir(_spec(retry="none"), None)
    assert default_sweep_dir(spec, None) != default_sweep_dir(_spec(attempts=3), None)
    assert default_sweep_dir(spec, "mine") == Path("ptb-sweeps/mine")
    open_sweep_dir(tmp_path / "s", spec)
    open_sweep_dir(tmp_path / "s", _spec(retry="none"))  # the retry policy may change
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["retry"] == "none"
    with pytest.raises(
        SweepError, match=r"models: started with \['qwen3-1.7b'\], now \['qwen3-4b'\]"
    ):
        open_sweep_dir(tmp_path / "s", _spec(models=["qwen3-4b"]))
    with pytest.raises(SweepError, match="concurrency: started with 1, now 4"):
        open_sweep_dir(tmp_path / "s", _spec(concurrency=4))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(SweepError, match="not a sweep directory"):
        open_sweep_dir(tmp_path / "other", spec)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_second_runner_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    with sweep_lock(tmp_path):
        with pytest.raises(SweepError, match="already running"):
            with sweep_lock(tmp_path):
                pass
    with sweep_lock(tmp_path):  # released: the next runner goes ahead
        pass


def _job(sweep: Path) -> Path:
    job = sweep / "jobs" / LEGACY_JOB_NAME
    job.mkdir(parents=True)
    return job


def test_only_infra_and_verifier_errors_are_retried_and_retired_not_deleted(
    tmp_path: Path,
) -> None:
    job = _job(tmp_path)
    ok = write_trial(job, TrialSpec(score=0.4))
    crashed = write_trial(job, TrialSpec(error="EnvironmentStartTimeoutError", score=None))
    unscored = write_trial(job, TrialSpec(score=None))  # the verifier wrote no reward
    judge = write_trial(job, TrialSpec(verifier_error="judge not configured: no key"))
    # The agent's own results: retrying them would give it extra attempts.
    no_model = write_trial(job, TrialSpec(verifier_error="final model not found at /x"))
    agent = write_trial(job, TrialSpec(error="ApiRateLimitError", score=None))
    running = write_trial(job, TrialSpec(finished=False))  # no result.json yet: Harbor's to rerun
    found = trials_to_retry(job)
    assert found == sorted([crashed, unscored, judge])
    assert retire(found, tmp_path / "retired") == ([p.name for p in found], [])
    assert sorted(p.name for p in (tmp_path / "retired").iterdir()) == sorted(p.name for p in found)
    assert all(p.is_dir() for p in (ok, no_model, agent, running)) and not crashed.exists()


def test_status_counts_progress_cost_and_gpu_hours(tmp_path: Path) -> None:
    spec = _spec()
    open_sweep_dir(tmp_path, spec)
    job = _job(tmp_path)
    cc = dict(agent="claude-code", agent_model="anthropic/claude-opus-4-1")
    write_trial(job, TrialSpec(**cc, score=0.5, cost_usd=2.0, agent_hours=3, gpus=1))
    write_trial(
        job, TrialSpec(**cc, error="AgentError", score=None, cost_usd=1.0, agent_hours=1, gpus=1)
    )
    write_trial(
        job,
        TrialSpec(**cc, verifier_error="final model not found", cost_usd=None, agent_hours=0),
    )
    write_trial(job, TrialSpec(**cc, finished=False))
    write_trial(
        job,
        TrialSpec(
            agent="codex",
            agent_model="openai/gpt-5",
            score=0.2,
            cost_usd=None,
            gpus=2,
            agent_hours=2,
        ),
    )
    status = sweep_status(tmp_path)
    by = {a.agent: a for a in status.agents}
    claude, codex = by["claude-code:anthropic/claude-opus-4-1"], by["codex:openai/gpt-5"]
    assert (claude.scored, claude.no_model, claude.errored, claude.to_retry) == (1, 1, 1, 0)
    # No runner holds the sweep's lock: the unfinished trial was interrupted, not running.
    assert (claude.running, claude.interrupted, claude.pending) == (0, 1, 0)
    assert status.runner == "stopped"
    assert claude.cost_usd == 3.0 and claude.gpu_hours == pytest.approx(4.0)
    assert (codex.scored, codex.pending, codex.cost_usd, codex.gpu_hours) == (
        1,
        3,
        None,
        pytest.approx(4.0),
    )
    assert status.planned == 8 and status.total("cost_usd") == 3.0


def test_cli_dry_run_writes_everything_and_runs_nothing(tmp_path: Path) -> None:
    result = run_ptb(
        "sweep",
        "-b",
        "bfcl",
        "-M",
        "smollm2-135m",
        "-a",
        "nop,oracle",
        "--n-attempts",
        "2",
        "--hours",
        "0.1",
        "--dry-run",
        "--name",
        "try",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    sweep = tmp_path / "ptb-sweeps" / "try"
    assert (
        "4 trials planned" in result.stdout
        and f"harbor run -c {sweep / 'harbor-job.json'}" in result.stdout
    )
    config = json.loads((sweep / "harbor-job.json").read_text())
    assert config["n_attempts"] == 2 and [a["name"] for a in config["agents"]] == ["nop", "oracle"]
    assert (sweep / "tasks" / "bfcl-smollm2-135m" / "task.toml").is_file() and not (
        sweep / "jobs"
    ).exists()
    status = run_ptb("sweep", "status", str(sweep), "--json")
    assert json.loads(status.stdout)["planned"] == 4


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cases = [
        (("sweep", "-b", "bfcl", "-a", "nop"), "needs -M/--base-model"),
        (
            ("sweep", "-b", "bfcl", "-M", "smollm2-135m", "-a", "nop", "--env", "mars"),
            "'mars' is not one of",
        ),
        (
            ("sweep", "-b", "nope", "-M", "smollm2-135m", "-a", "nop", "--dry-run"),
            "unknown benchmark 'nope'",
        ),
        (
            (
                "sweep",
                "-b",
                "bfcl",
                "-M",
                "smollm2-135m",
                "-a",
                "nop",
                "--n-attempts",
                "0",
                "--dry-run",
            ),
            "attempts",
        ),
        (("sweep", "status", str(tmp_path)), "not a sweep directory"),
        (
            (
                "sweep",
                "-b",
                "bfcl",
                "-M",
                "smollm2-135m",
                "-a",
                "nop",
                "--cache-volume",
                "c",
                "--dry-run",
            ),
            "--cache-volume: only with --env modal or daytona",
        ),
        (
            (
                "sweep",
                "-b",
                "bfcl",
                "-M",
                "smollm2-135m",
                "-a",
                "nop",
                "--reprompt-min-minutes",
                "0",
                "--dry-run",
            ),
            "reprompt_min_minutes",
        ),
    ]
    for args, message in cases:
        result = run_ptb(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], (
            args,
            result.stderr,
        )


def test_cloud_sweep_config_reprompts_pins_and_mounts_the_cache(tmp_path: Path) -> None:
    result = run_ptb(
        "sweep",
        "-b",
        "bfcl",
        "-M",
        "qwen3-1.7b",
        "-a",
        "claude-code:anthropic/claude-opus-4-1",
        "--env",
        "modal",
        "--cache-volume",
        "ptb-cache",
        "--reprompt-min-minutes",
        "45",
        "--dry-run",
        "--name",
        "cloud",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    sweep = tmp_path / "ptb-sweeps" / "cloud"
    config = json.loads((sweep / "harbor-job.json").read_text())
    environment, (agent,) = config["environment"], config["agents"]
    assert (
        environment["import_path"] == "posttrainbench.host.envs.modal_trial:ModalTrialEnvironment"
    )
    assert environment["kwargs"] == {"cache_volume": "ptb-cache"}
    assert agent["import_path"] == "posttrainbench.host.agents.reprompt:RepromptingAgent"
    assert (
        agent["kwargs"]["inner"] == "claude-code" and agent["kwargs"]["min_remaining_minutes"] == 45
    )
    from posttrainbench.host.tasks.gpu_image import agent_cli_version

    assert agent["kwargs"]["version"] == agent_cli_version(
        "claude-code"
    )  # what the GPU image preinstalls
    task_toml = (sweep / "tasks" / "bfcl-qwen3-1.7b" / "task.toml").read_text()
    assert 'gpu_types = ["H100"]' in task_toml
    # A wrapped agent's trial is counted under the agent the sweep names.
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig

    from posttrainbench.host.sweep.status import _label_from_config

    trial = sweep / "jobs" / "sweep" / "t__1"
    trial.mkdir(parents=True)
    trial_config = TrialConfig(
        task=TaskConfig(path=sweep / "tasks" / "bfcl-qwen3-1.7b"), agent=AgentConfig(**agent)
    )
    (trial / "config.json").write_text(trial_config.model_dump_json())
    assert _label_from_config(trial) == "claude-code:anthropic/claude-opus-4-1"


def test_the_old_retry_word_still_reads_as_infra() -> None:
    """`--retry errored` and sweep files written before the rename mean `infra`."""
    from posttrainbench.host.sweep.spec import SweepSpec

    base = {"benchmarks": ["gsm8k"], "models": ["smollm2-135m"], "agents": [{"agent": "nop"}]}
    assert SweepSpec.model_validate({**base, "retry": "errored"}).retry == "infra"
    assert SweepSpec.model_validate(base).retry == "infra"
    assert SweepSpec.model_validate({**base, "retry": "none"}).retry == "none"
