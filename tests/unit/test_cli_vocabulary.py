"""One flag vocabulary across `ptb` (README "Commands"), Harbor's where `harbor run` has the
word; a flag that changed meaning answers with a one-line hint; help pages list choices,
defaults and an example and show no Python type names; `--json` prints only JSON."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from posttrainbench.host.cli import eval_cmd, options, rescore_cmd
from posttrainbench.host.cli.app import app
from tests.helpers import REPO, run_ptb

# Typer's raw type names, as `<bool>`, `<list[path]>` or `<int range>` print them.
RAW_TYPE = re.compile(r"<(bool|str|int|float|path|file|directory|list\[[^>]*)>|range>")


def _commands(command=None, path=()):
    """(path, click command) of every group and command under `ptb`."""
    command = command or typer.main.get_command(app)
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


def _flags():
    """(command path, long flag, short flags, metavar, choices) of every option."""
    for path, command in _commands():
        for param in command.params:
            if param.param_type_name != "option":
                continue
            longs = [o for o in param.opts if o.startswith("--")]
            shorts = [o for o in param.opts if not o.startswith("--")]
            choices = getattr(param.type_descriptor, "choices", None)
            yield " ".join(path), longs[0], tuple(shorts), param.metavar, choices


def _readme_vocabulary() -> dict[str, set[str]]:
    """Short flag -> its long flags, from the README's vocabulary table."""
    table: dict[str, set[str]] = {}
    for line in (REPO / "README.md").read_text().splitlines():
        m = re.match(r"\| `(-\w)`, `(--[\w-]+)", line)
        if m:
            table.setdefault(m.group(1), set()).add(m.group(2))
    return table


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "-b", "gsm8k", "-m", "smollm2-135m", "-a", "oracle"], options.MODEL_HINT),
        (["run", "-b", "gsm8k", "--model", "qwen3-1.7b", "-a", "nop"], options.MODEL_HINT),
        (["baseline", "-b", "gsm8k", "-m", "smollm2-135m"], options.MODEL_HINT),
        (["tasks", "generate", "-b", "bfcl", "-m", "smollm2-135m", "-o", "x"], options.MODEL_HINT),
        (["sweep", "-b", "bfcl", "-m", "smollm2-135m", "-a", "nop"], options.MODEL_HINT),
        (["data", "prepare", "--models", "smollm2-135m"], "--models is now -M/--base-model"),
        (["sweep", "--concurrency", "2"], "--concurrency is now -n/--n-concurrent"),
        (["sweep", "--attempts", "2"], "--attempts is now -k/--n-attempts"),
        (["run", "--agent-model", "openai/gpt-5"], "--agent-model is now -m/--model"),
        (["results", "export", "jobs", "--to", "res"], "--to is now -o/--out"),
        (["judge", "trial", "--out-dir", "o"], "--out-dir is now -o/--out"),
        (["judge", "trial", "--base-model", "b"], "--base-model-dir"),
        (["eval", "--tasks", "gsm8k", "--model-path", "m"], "-b/--benchmark (lm-eval's --tasks)"),
    ],
)
def test_a_changed_spelling_answers_with_one_line(args: list[str], expected: str) -> None:
    result = run_ptb(*args, timeout=120)
    assert result.returncode == 2, result.stderr
    assert expected in _one_error_line(result.stderr)
    assert result.stdout == ""


def test_sweep_model_is_the_agents_model_as_in_harbor(tmp_path: Path) -> None:
    """`-m MODEL` goes to every agent that names no model of its own (`-a AGENT:MODEL`)."""
    result = run_ptb(
        *("sweep", "-b", "bfcl", "-M", "smollm2-135m", "-a", "nop", "-a", "oracle:openai/gpt-4o"),
        *("-m", "openai/gpt-5", "--hours", "0.1", "--dry-run", "-o", str(tmp_path / "s")),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "s" / "harbor-job.json").read_text())
    assert [(a["name"], a["model_name"]) for a in config["agents"]] == [
        ("nop", "openai/gpt-5"),
        ("oracle", "openai/gpt-4o"),
    ]


def test_each_flag_has_one_spelling_everywhere() -> None:
    shorts_of: dict[str, set[str]] = {}
    longs_of: dict[str, set[str]] = {}
    metavars_of: dict[str, set[str]] = {}
    for _, long, shorts, metavar, choices in _flags():
        shorts_of.setdefault(long, set()).update(shorts)
        for short in shorts:
            longs_of.setdefault(short, set()).add(long)
        if not choices and metavar is not None:
            metavars_of.setdefault(long, set()).add(metavar)
    assert {k: v for k, v in shorts_of.items() if len(v) > 1} == {}
    # `-o` is where the output goes: --out (the file or directory written) or --runs-dir
    # (the directory runs go under, harbor run's -o); every other short flag is one flag.
    assert {k: v for k, v in longs_of.items() if len(v) > 1} == {"-o": {"--out", "--runs-dir"}}
    # The same value everywhere (sweep's -a also takes the agent's model after a colon).
    assert {k: v for k, v in metavars_of.items() if len(v) > 1} == {
        "--agent": {"AGENT", "AGENT[:MODEL]"}
    }
    # Harbor's meanings, and the README table, hold wherever the flag appears.
    readme = _readme_vocabulary()
    for short, longs in longs_of.items():
        if short in readme:
            assert longs <= readme[short], (short, longs)
    for short, long in (("-a", "--agent"), ("-m", "--model"), ("-e", "--env")):
        assert longs_of[short] == {long} and readme[short] == {long}
    assert longs_of["-n"] == {"--n-concurrent"} and longs_of["-k"] == {"--n-attempts"}
    assert longs_of["-M"] == {"--base-model"} and longs_of["-b"] == {"--benchmark"}


def test_help_pages_are_plain_and_complete() -> None:
    runner = CliRunner()
    for path, command in _commands():
        shown = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, (path, shown.output)
        assert not RAW_TYPE.search(shown.output), (path, RAW_TYPE.search(shown.output))
        if not getattr(command, "commands", None) or path == ("sweep",):
            assert "Example: ptb " in shown.output, path
    run_help = runner.invoke(app, ["run", "-h"], env={"COLUMNS": "200"}).output
    for shown in ("[local|docker|modal|daytona]", "[test|dev|none]", "[auto|api-key|subscription]"):
        assert shown in run_help
    assert "[required]" in run_help and "[default: ptb-runs]" in run_help
    sweep_help = runner.invoke(app, ["sweep", "-h"], env={"COLUMNS": "200"}).output
    assert "[infra|none|errored]" in sweep_help and "[docker|singularity]" in sweep_help
    status_help = runner.invoke(app, ["sweep", "status", "-h"], env={"COLUMNS": "200"}).output
    assert "SWEEP_DIR" in status_help and "--retry" not in status_help
    collect_help = runner.invoke(app, ["results", "collect", "-h"], env={"COLUMNS": "200"})
    assert "[latest|best|mean|ptb]" in collect_help.output


def test_an_invalid_choice_is_one_line_naming_the_choices() -> None:
    result = run_ptb("tasks", "generate", "-b", "bfcl", "-M", "smollm2-135m", "--feedback", "val")
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "--feedback" in line and "'test', 'dev', 'none'" in line and "Value error" not in line


def test_choices_mirror_the_fields_that_store_them() -> None:
    from posttrainbench.host.credentials.resolve import AuthMode
    from posttrainbench.host.rescore.run import RescoreEnv
    from posttrainbench.host.runner.environments import ENV_NAMES
    from posttrainbench.host.tasks.options import CompileOptions
    from posttrainbench.task.evaluation.backends import _BACKENDS

    def values(literal) -> set[str]:
        return set(typing.get_args(literal))

    fields = CompileOptions.model_fields
    assert values(options.EnvName) == set(ENV_NAMES)
    assert values(options.FeedbackName) == values(fields["feedback"].annotation)
    assert values(options.ModelSource) == values(fields["model_from"].annotation)
    assert values(options.AuthName) == {mode.value for mode in AuthMode}
    assert values(eval_cmd.BackendName) == set(_BACKENDS)
    assert values(rescore_cmd.RescoreEnvName) == values(RescoreEnv)


FAKE_METRICS = {
    "benchmark": "gsm8k",
    "model_path": "/m",
    "accuracy": 0.5,
    "stderr": 0.25,
    "n": 4,
    "n_correct": 2,
}


def _fake_evaluation(monkeypatch, tmp_path: Path) -> Path:
    """`ptb eval`/`baseline` up to the evaluation module, which writes its metrics JSON and
    chatters on stdout as the real one may."""
    import posttrainbench.host.data.prepare as prepare
    import posttrainbench.host.envs.eval_env as eval_env

    def run_module(python, module, args, env):
        print("loading model ...")
        out = Path(args[args.index("--json-out") + 1])
        out.write_text(json.dumps(FAKE_METRICS))
        return 0

    monkeypatch.setattr(prepare, "prepare_benchmark", lambda benchmark: None)
    monkeypatch.setattr(eval_env, "evaluation_python", lambda say: "python")
    monkeypatch.setattr(eval_env, "run_module", run_module)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def test_eval_and_baseline_json_is_the_metrics_alone(monkeypatch, tmp_path: Path) -> None:
    model = _fake_evaluation(monkeypatch, tmp_path)
    shown = CliRunner().invoke(app, ["eval", "-b", "gsm8k", "--model-path", str(model), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == FAKE_METRICS
    assert "loading model" in shown.stderr

    cache = tmp_path / "cache"
    (cache / "models" / "smollm2-135m").mkdir(parents=True)
    (cache / "models" / "smollm2-135m" / "config.json").write_text("{}")
    monkeypatch.setenv("PTB_CACHE_DIR", str(cache))
    written = tmp_path / "b.json"
    shown = CliRunner().invoke(
        app, ["baseline", "-b", "gsm8k", "-M", "smollm2-135m", "--json", "-o", str(written)]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["accuracy"] == 0.5 and json.loads(written.read_text())["n"] == 4
    # ... and kept where `ptb list baselines` finds it (stderr says where, on one line).
    assert f"stored in {cache / 'baselines' / 'measured.json'}" in shown.stderr


def test_run_json_is_the_run_record_alone(monkeypatch, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    import posttrainbench.host.runner.job_runner as job_runner
    from posttrainbench.host.runner.record import RunRecord

    def fake_run(request):
        print("Harbor's progress display")
        return RunRecord(
            run_id="r1",
            command="ptb run",
            benchmark=request.benchmark,
            model=request.model,
            agent=request.agent,
            agent_model=request.agent_model,
            environment=request.env,
            hours=0.1,
            attempts=request.attempts,
            task_dir="t",
            job_dir="j",
            harbor_version="0",
            posttrainbench_version="0",
            started_at=datetime.now(UTC),
            status="completed",
        )

    monkeypatch.setattr(job_runner, "run", fake_run)
    args = ["run", "-b", "gsm8k", "-M", "smollm2-135m", "-a", "claude-code"]
    args += ["-m", "anthropic/claude-opus-4-1", "-k", "2", "-o", str(tmp_path), "--json"]
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert (
        record["model"] == "smollm2-135m" and record["agent_model"] == "anthropic/claude-opus-4-1"
    )
    assert record["attempts"] == 2 and "progress display" in shown.stderr


def test_judge_json_is_the_judgements_alone(tmp_path: Path) -> None:
    from tests.unit.test_judges_cli import NO_LLM, make_trial

    trial, base = make_trial(tmp_path, "clean_claude_code.txt")
    result = run_ptb(
        "judge",
        str(trial),
        "--base-model-dir",
        str(base),
        "--judges",
        "disallowed_model,api_usage",
        "--json",
        env=NO_LLM,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    judged = json.loads(result.stdout)
    assert [j["judge"] for j in judged] == ["disallowed_model", "api_usage"]
    assert all(j["flagged"] is False for j in judged)
