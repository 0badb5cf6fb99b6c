"""`ptb agent-task build`: the compiled Harbor task, secrets, baseline archive, hidden data."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from posttrainbench.host.cli.app import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-task-gsm8k"
CANARY = "ptb-canary-7f3a9c-do-not-leak"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
    )


def make_config(
    root: Path, *, secrets: list[str] | None = None, commit: bool = True, git: bool = True
) -> Path:
    """The example task in *root*: the baseline inside a bigger git repo (like this project)."""
    shutil.copytree(EXAMPLE / "data", root / "task" / "data")
    shutil.copytree(EXAMPLE / "baseline", root / "task" / "baseline")
    data = yaml.safe_load((EXAMPLE / "task.yaml").read_text())
    data["secrets"] = secrets or []
    (root / "task" / "task.yaml").write_text(yaml.safe_dump(data))
    if git:
        _git(root, "init", "--quiet")
        if commit:
            _git(root, "add", "task/baseline")
            _git(root, "commit", "--quiet", "-m", "baseline")
    return root / "task" / "task.yaml"


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), standalone_mode=False)
    code = result.exit_code
    if result.exception is not None and hasattr(result.exception, "exit_code"):
        code = result.exception.exit_code
    return code, result.output + (str(result.exception) if result.exception else "")


def test_compiled_task_parses_with_harbor(tmp_path: Path) -> None:
    from harbor.models.task.config import TaskConfig

    task = build_agent_task(make_config(tmp_path), tmp_path / "out")
    config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    assert config.agent.user == "agent"
    assert config.verifier.environment_mode.value == "shared" and config.verifier.user == "root"
    assert config.environment.healthcheck.command == "bash /opt/ptb/start.sh"
    for script in (
        "tests/test.sh",
        "solution/solve.sh",
        "environment/ptb/start.sh",
        "environment/ptb/build.sh",
    ):
        assert (task / script).stat().st_mode & 0o111, script
    private = yaml.safe_load((task / "environment/ptb/agent-task/private/task.yaml").read_text())
    assert private["baseline"] == "baseline" and private["dataset"] == "data"
    assert (task / "environment/ptb/lib/posttrainbench/service/api/service.py").is_file()
    assert not (task / "environment/ptb/lib/posttrainbench/host/agent_tasks/compiler.py").exists()
    assert "http://127.0.0.1:8765/eval" in (task / "instruction.md").read_text()


def test_secret_is_referenced_by_name_and_its_value_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TEST_SECRET", CANARY)
    code, output = run_cli(
        "agent-task",
        "build",
        str(make_config(tmp_path, secrets=["PTB_TEST_SECRET"])),
        "-o",
        str(tmp_path / "out"),
    )
    assert code == 0, output
    task = tmp_path / "out" / "gsm8k-solver"
    for path in task.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    # Not in the environment Harbor hands to every command (the agent's too), nor the verifier's.
    from harbor.models.task.config import TaskConfig

    config = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    assert (
        "PTB_TEST_SECRET" not in config.environment.env
        and "PTB_TEST_SECRET" not in config.verifier.env
    )
    assert "${PTB_TEST_SECRET}" not in (task / "task.toml").read_text()
    # By name, for the environment plugins; the service and the final scoring load the values.
    assert json.loads((task / "environment/ptb-secrets.json").read_text()) == {
        "names": ["PTB_TEST_SECRET"]
    }
    start = (task / "environment/ptb/start.sh").read_text()
    assert '--secrets-file "$SECRETS"' in start and "plain Harbor environments do not" in start
    test_sh = (task / "tests/test.sh").read_text()
    assert "--secrets-file" in test_sh and "/run/ptb-secrets/secrets.json" in test_sh
    assert (task / "tests/lib/posttrainbench/core/secrets_file.py").is_file()


def test_a_task_without_secrets_has_no_secrets_channel(tmp_path: Path) -> None:
    task = build_agent_task(make_config(tmp_path), tmp_path / "out")
    assert not (task / "environment/ptb-secrets.json").exists()
    assert "--secrets-file" not in (task / "environment/ptb/start.sh").read_text()
    assert "--secrets-file" not in (task / "tests/test.sh").read_text()


def test_missing_secret_fails_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PTB_TEST_SECRET", raising=False)
    code, output = run_cli(
        "agent-task",
        "build",
        str(make_config(tmp_path, secrets=["PTB_TEST_SECRET"])),
        "-o",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert "PTB_TEST_SECRET" in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "git, commit", [(False, False), (True, False)], ids=["not-a-repo", "no-commit"]
)
def test_failed_baseline_archive_is_one_line_exit_2(
    tmp_path: Path, git: bool, commit: bool
) -> None:
    code, output = run_cli(
        "agent-task",
        "build",
        str(make_config(tmp_path, git=git, commit=commit)),
        "-o",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert "baseline" in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_baseline_is_the_committed_head_only(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    committed = (tmp_path / "task/baseline/solve.py").read_text()
    (tmp_path / "task/baseline/solve.py").write_text("print('uncommitted')\n")
    (tmp_path / "task/baseline/untracked.py").write_text("x = 1\n")
    task = build_agent_task(config, tmp_path / "out")
    for tree in (
        task / "environment/workspace",
        task / "environment/ptb/agent-task/private/baseline",
    ):
        assert sorted(p.name for p in tree.iterdir()) == ["solve.py"]
        assert (tree / "solve.py").read_text() == committed


def test_hidden_split_never_reaches_agent_visible_parts(tmp_path: Path) -> None:
    task = build_agent_task(make_config(tmp_path), tmp_path / "out")
    hidden = [
        json.loads(line)
        for line in (EXAMPLE / "data/test.jsonl").read_text().splitlines()
        if line.strip()
    ]
    visible = [
        task / "instruction.md",
        *(p for p in (task / "environment/workspace").rglob("*") if p.is_file()),
        *(p for p in (task / "solution").rglob("*") if p.is_file()),
    ]
    for path in visible:
        text = path.read_text(errors="replace")
        for sample in hidden:
            assert sample["question"][:60] not in text, (path, sample["id"])
    # Only the root-only private dir (and nothing the agent gets) holds the hidden split.
    holders = [p for p in task.rglob("test.jsonl")]
    assert holders == [task / "environment/ptb/agent-task/private/data/test.jsonl"]
    assert "chmod -R go-rwx" in (task / "environment/ptb/build.sh").read_text()


def test_rebuild_replaces_the_task_atomically(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    first = build_agent_task(config, tmp_path / "out", BuildOptions(port=9001))
    (first / "stale.txt").write_text("old")
    second = build_agent_task(config, tmp_path / "out", BuildOptions(port=9002))
    assert second == first and not (second / "stale.txt").exists()
    assert "127.0.0.1:9002" in (second / "instruction.md").read_text()
    assert [p.name for p in (tmp_path / "out").iterdir()] == [
        "gsm8k-solver"
    ]  # no staging left behind


def test_a_mode_b_task_carries_harbor_its_tasks_and_the_nested_sandbox_needs(
    tmp_path: Path,
) -> None:
    """Mode B compiles: pinned Harbor in the service's venv, the inner tasks of every named
    split (hidden ones only in the root-only private copy), the whole package as the service's
    code, the local sandbox told to allow nested sandboxes, Docker refused in one line."""
    from importlib import metadata

    from posttrainbench.host.envs.environment_needs import NEEDS_FILE_NAME, EnvironmentNeeds
    from tests.helpers import REPO, run_ptb

    result = run_ptb(
        "agent-task",
        "build",
        str(REPO / "examples" / "agent-task-harbor" / "task.yaml"),
        "-o",
        str(tmp_path / "tasks"),
        "--no-network",
    )
    assert result.returncode == 0, result.stderr
    task = tmp_path / "tasks" / "harbor-echo"
    requirements = (task / "environment" / "requirements.txt").read_text().splitlines()
    assert f"harbor=={metadata.version('harbor')}" in requirements
    pins = [line for line in requirements if line and not line.startswith("#")]
    assert pins and all("==" in line for line in pins)  # every dependency pinned exactly
    needs = EnvironmentNeeds.model_validate_json(
        (task / "environment" / NEEDS_FILE_NAME).read_text()
    )
    assert needs.nested_sandboxes and needs.min_python == "3.12"
    private = task / "environment" / "ptb" / "agent-task" / "private" / "data"
    assert sorted(p.name for p in (private / "tasks").iterdir()) == [
        "echo-alpha",
        "echo-beta",
        "echo-delta",
        "echo-gamma",
    ]
    assert (private / "test.txt").is_file() and (private / "train.txt").is_file()
    # The hidden split's tasks appear nowhere the agent can read.
    visible = [p for p in task.rglob("*") if "private" not in p.parts and p.is_file()]
    assert not any("echo-gamma" in p.as_posix() for p in visible)
    assert not any("gamma" in p.read_text(errors="replace") for p in visible if p.suffix != ".py")
    for lib in (task / "environment" / "ptb" / "lib", task / "tests" / "lib"):
        assert (lib / "posttrainbench" / "host" / "envs" / "local_sandbox.py").is_file()
    assert "local sandbox only" in (task / "environment" / "Dockerfile").read_text()
    start = (task / "environment" / "ptb" / "start.sh").read_text()
    assert 'chmod 0711 "$STATE"' in start and "PTB_CACHE_DIR=" in start
    assert (task / "solution" / "overlay" / "agent.py").is_file()
    # Built without a network: candidates get no sockets (only the agent and the service
    # would answer), and the instruction says so.
    private_config = yaml.safe_load((private.parent / "task.yaml").read_text())
    assert private_config["scoring"]["candidate_network"] is False
    assert "cannot open\nsockets" in (task / "instruction.md").read_text()


def test_readme_build_command_compiles_the_example(tmp_path: Path) -> None:
    """README's `ptb agent-task build examples/agent-task-gsm8k/task.yaml -o tasks/ --no-network`."""
    from tests.helpers import REPO, run_ptb

    result = run_ptb(
        "agent-task",
        "build",
        str(REPO / "examples" / "agent-task-gsm8k" / "task.yaml"),
        "-o",
        str(tmp_path / "tasks"),
        "--no-network",
    )
    assert result.returncode == 0, result.stderr
    task = tmp_path / "tasks" / "gsm8k-solver"
    assert 'network_mode = "no-network"' in (task / "task.toml").read_text()
    assert (task / "solution" / "solve.sh").is_file() and (task / "tests" / "test.sh").is_file()
