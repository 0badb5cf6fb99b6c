"""Agent credentials: API keys, subscription files (mode 0600), removal of API keys,
placement of the secrets dir, and a missing secret stopping `ptb run` before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.host.credentials.resolve import (
    AuthMode,
    CredentialError,
    forbidden_roots,
    resolve_credentials,
    spec_for,
)
from tests.helpers import REPO, run_ptb

OPENAI_KEY = "sk-test-openai-0123456789abcdefABCDEF"
AUTH_JSON = {
    "OPENAI_API_KEY": None,
    "tokens": {
        "id_token": "id-token-canary-123456789",
        "access_token": "access-canary-987654321",
        "refresh_token": "refresh-canary-555555555",
        "account_id": "acct-canary-42424242",
    },
    "last_refresh": "2025-01-01T00:00:00Z",
}


def _secrets_dir(tmp_path: Path, mode: int = 0o600) -> Path:
    directory = tmp_path / "secrets"
    (directory / "codex").mkdir(parents=True)
    auth = directory / "codex" / "auth.json"
    auth.write_text(json.dumps(AUTH_JSON))
    auth.chmod(mode)
    return directory


def test_api_key_is_passed_as_a_template_and_kept_for_the_scrubber() -> None:
    resolved = resolve_credentials(
        spec_for("codex"), {"OPENAI_API_KEY": OPENAI_KEY}, secrets_dir=None, forbidden=[]
    )
    assert resolved.summary.kind == "api-key" and resolved.summary.variables == ["OPENAI_API_KEY"]
    assert resolved.agent_env == {"OPENAI_API_KEY": "${OPENAI_API_KEY}"}
    assert resolved.secret_values == {"OPENAI_API_KEY": OPENAI_KEY}
    assert OPENAI_KEY not in resolved.summary.model_dump_json()


def test_subscription_removes_the_providers_api_keys(tmp_path: Path) -> None:
    directory = _secrets_dir(tmp_path)
    env = {"OPENAI_API_KEY": OPENAI_KEY, "CODEX_API_KEY": "codex-key-abcdefgh123"}
    resolved = resolve_credentials(spec_for("codex"), env, secrets_dir=directory, forbidden=[])
    assert resolved.summary.kind == "subscription" and resolved.summary.source == "secrets-dir"
    # Blank values in Harbor's overlay hide the host's keys from the agent.
    assert resolved.agent_env["OPENAI_API_KEY"] == "" and resolved.agent_env["CODEX_API_KEY"] == ""
    assert resolved.agent_env["CODEX_AUTH_JSON_PATH"] == str(directory / "codex" / "auth.json")
    assert set(resolved.summary.removed) == {"OPENAI_API_KEY", "CODEX_API_KEY"}
    assert "OPENAI_API_KEY, CODEX_API_KEY removed" in (resolved.message or "")
    # Every token of the file is known to the scrubber; the timestamp is not a secret.
    values = set(resolved.secret_values.values())
    assert set(AUTH_JSON["tokens"].values()) <= values and "2025-01-01T00:00:00Z" not in values
    # The summary (what run.json keeps) holds names only.
    dumped = resolved.summary.model_dump_json()
    assert not any(v in dumped for v in values)


def test_claude_oauth_token_file_forces_oauth(tmp_path: Path) -> None:
    directory = tmp_path / "secrets"
    (directory / "claude-code").mkdir(parents=True)
    token = directory / "claude-code" / "oauth_token"
    token.write_text("sk-ant-oat01-canarytoken0123456789\n")
    token.chmod(0o600)
    resolved = resolve_credentials(
        spec_for("claude-code"),
        {"ANTHROPIC_API_KEY": "sk-ant-api-abcdef0123456789"},
        secrets_dir=directory,
        forbidden=[],
    )
    assert resolved.agent_env["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-canarytoken0123456789"
    assert resolved.agent_env["CLAUDE_FORCE_OAUTH"] == "1"
    assert (
        resolved.agent_env["ANTHROPIC_API_KEY"] == ""
        and resolved.agent_env["ANTHROPIC_AUTH_TOKEN"] == ""
    )


def test_secret_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    directory = _secrets_dir(tmp_path, mode=0o644)
    with pytest.raises(CredentialError) as err:
        resolve_credentials(spec_for("codex"), {}, secrets_dir=directory, forbidden=[])
    message = str(err.value)
    assert str(directory / "codex" / "auth.json") in message and "chmod 600" in message


def test_auth_modes(tmp_path: Path) -> None:
    directory = _secrets_dir(tmp_path)
    env = {"OPENAI_API_KEY": OPENAI_KEY}
    api = resolve_credentials(
        spec_for("codex"), env, mode=AuthMode.API_KEY, secrets_dir=directory, forbidden=[]
    )
    assert api.summary.kind == "api-key"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CredentialError, match="auth.json"):
        resolve_credentials(
            spec_for("codex"), env, mode=AuthMode.SUBSCRIPTION, secrets_dir=empty, forbidden=[]
        )
    with pytest.raises(CredentialError, match="no subscription"):
        resolve_credentials(
            spec_for("opencode", "anthropic/x"),
            env,
            mode=AuthMode.SUBSCRIPTION,
            secrets_dir=empty,
            forbidden=[],
        )


def test_missing_secret_names_the_variables(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CredentialError) as err:
        resolve_credentials(
            spec_for("codex"), {"OPENAI_API_KEY": ""}, secrets_dir=empty, forbidden=[]
        )
    assert "OPENAI_API_KEY or CODEX_API_KEY" in str(err.value) and "auth.json" in str(err.value)
    with pytest.raises(CredentialError, match="ANTHROPIC_API_KEY"):
        resolve_credentials(
            spec_for("opencode", "anthropic/claude-x"), {}, secrets_dir=empty, forbidden=[]
        )
    with pytest.raises(CredentialError, match="does not exist"):
        resolve_credentials(spec_for("codex"), {}, secrets_dir=tmp_path / "nope", forbidden=[])


def test_agents_without_credentials_and_unknown_profiles(tmp_path: Path) -> None:
    for agent in ("oracle", "nop", "tests.canary_agent:CanaryAgent"):
        resolved = resolve_credentials(spec_for(agent), {}, secrets_dir=None, forbidden=[])
        assert resolved.summary.kind == "none" and resolved.agent_env == {}
    assert spec_for("tests.canary_agent:CanaryAgent", profile="codex").profile == "codex"
    with pytest.raises(CredentialError, match="unknown credential profile"):
        spec_for("x:Y", profile="bogus")


def test_secrets_dir_inside_repository_or_output_is_refused(tmp_path: Path) -> None:
    inside_output = _secrets_dir(tmp_path / "runs")
    with pytest.raises(CredentialError, match="outside the repository"):
        resolve_credentials(
            spec_for("codex"),
            {},
            secrets_dir=inside_output,
            forbidden=forbidden_roots(tmp_path / "runs"),
        )
    assert REPO in forbidden_roots(tmp_path / "runs", cwd=REPO)
    inside_repo = REPO / "tests"  # an existing directory of the repository
    with pytest.raises(CredentialError, match="outside the repository"):
        resolve_credentials(
            spec_for("codex"), {}, secrets_dir=inside_repo, forbidden=forbidden_roots(tmp_path)
        )


def test_harbor_hands_the_env_to_the_agent_without_writing_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Harbor 0.26 gives AgentConfig.env to the agent as extra_env; its config dump keeps templates."""
    from harbor.agents.factory import AgentFactory

    from posttrainbench.host.runner.job_runner import RunRequest, job_config

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    resolved = resolve_credentials(
        spec_for("codex"), {"OPENAI_API_KEY": OPENAI_KEY}, forbidden=[], secrets_dir=None
    )
    request = RunRequest(
        benchmark="bfcl", model="smollm2-135m", agent="tests.canary_agent:CanaryAgent", env="docker"
    )
    config = job_config(request, tmp_path / "task", tmp_path / "jobs", "run", resolved.agent_env)
    assert OPENAI_KEY not in config.model_dump_json()
    agent = AgentFactory.create_agent_from_config(config.agents[0], logs_dir=tmp_path / "logs")
    assert agent._extra_env["OPENAI_API_KEY"] == OPENAI_KEY


def test_cli_missing_secret_exits_2_before_anything_is_written(tmp_path: Path) -> None:
    empty = tmp_path / "secrets"
    empty.mkdir()
    runs = tmp_path / "runs"
    result = run_ptb(
        "run",
        "-b",
        "bfcl",
        "-M",
        "smollm2-135m",
        "-a",
        "codex",
        "--env",
        "local",
        "--runs-dir",
        str(runs),
        "--secrets-dir",
        str(empty),
        cwd=REPO,
        env={"OPENAI_API_KEY": "", "CODEX_API_KEY": ""},
    )
    assert result.returncode == 2, result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith("error:") and "OPENAI_API_KEY" in line
    assert not runs.exists()  # no task dir, no job dir, no run.json


def test_cli_loose_secret_file_exits_2_naming_it(tmp_path: Path) -> None:
    directory = _secrets_dir(tmp_path, mode=0o640)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "kept.txt").write_text("earlier results")
    result = run_ptb(
        "run",
        "-b",
        "bfcl",
        "-M",
        "smollm2-135m",
        "-a",
        "codex",
        "--runs-dir",
        str(runs),
        cwd=REPO,
        env={"PTB_SECRETS_DIR": str(directory)},
    )
    assert result.returncode == 2, result.stderr
    assert "chmod 600" in result.stderr and "auth.json" in result.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["kept.txt"]
    assert (runs / "kept.txt").read_text() == "earlier results"


def test_harbor_masked_literal_is_scrubbed_too(tmp_path: Path) -> None:
    """A file token is a literal in AgentConfig.env; Harbor writes it masked, and the
    scrubber removes even the masked form (first 4 + last 3 characters)."""
    from harbor.utils.env import templatize_sensitive_env

    from posttrainbench.host.credentials.scrub import Scrubber

    directory = tmp_path / "secrets"
    (directory / "claude-code").mkdir(parents=True)
    (directory / "claude-code" / "oauth_token").write_text("sk-ant-oat01-maskedcanary0123456789")
    (directory / "claude-code" / "oauth_token").chmod(0o600)
    resolved = resolve_credentials(spec_for("claude-code"), {}, secrets_dir=directory, forbidden=[])
    written = templatize_sensitive_env(resolved.agent_env)["CLAUDE_CODE_OAUTH_TOKEN"]
    assert "maskedcanary" not in written and "****" in written
    assert (
        Scrubber(resolved.secret_values).scrub_text(f'"{written}"')
        == '"[REDACTED:claude-code/oauth_token]"'
    )
