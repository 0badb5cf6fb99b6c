"""OpenCode with Zhipu's GLM models: the key it needs and the provider block it gets."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from posttrainbench.host.agents.opencode_glm import (
    GLM_PROVIDERS,
    OpenCodeConfigError,
    opencode_agent_kwargs,
    opencode_provider_config,
)
from posttrainbench.host.credentials.resolve import (
    PROVIDER_KEYS,
    CredentialError,
    resolve_credentials,
    spec_for,
)

SECRET = "zk-canary-0123456789abcdef.SECRETVALUE"


@pytest.fixture(autouse=True)
def _offline_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    # Harbor parses model names with LiteLLM, which otherwise tries to fetch a price map.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")


@pytest.mark.parametrize("model", ["zai/glm-4.6", "zai-coding-plan/glm-4.6", "zhipuai/glm-4.6"])
def test_opencode_glm_asks_for_zhipus_key(model: str) -> None:
    spec = spec_for("opencode", model)
    assert spec.required and spec.api_key_vars[0] == "ZHIPU_API_KEY"
    assert (
        spec.api_key_vars
        == GLM_PROVIDERS[model.split("/")[0]].key_vars
        == PROVIDER_KEYS[model.split("/")[0]]
    )


def test_the_key_reaches_the_agent_as_a_reference(tmp_path: Path) -> None:
    resolved = resolve_credentials(
        spec_for("opencode", "zai/glm-4.6"), {"ZHIPU_API_KEY": SECRET}, secrets_dir=tmp_path
    )
    assert resolved.agent_env == {"ZHIPU_API_KEY": "${ZHIPU_API_KEY}"}
    assert resolved.secret_values == {"ZHIPU_API_KEY": SECRET}
    with pytest.raises(CredentialError, match="ZHIPU_API_KEY or ZAI_API_KEY"):
        resolve_credentials(spec_for("opencode", "zai/glm-4.6"), {}, secrets_dir=tmp_path)


@pytest.mark.parametrize(
    ("model", "base_url"),
    [
        ("zai/glm-4.6", "https://api.z.ai/api/paas/v4"),
        ("zai-coding-plan/glm-4.6", "https://api.z.ai/api/coding/paas/v4"),
        ("zhipuai/glm-4.5-air", "https://open.bigmodel.cn/api/paas/v4"),
    ],
)
def test_the_provider_block_is_complete_and_holds_no_secret(
    model: str, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZHIPU_API_KEY", SECRET)
    config = opencode_provider_config(model, "ZHIPU_API_KEY")
    provider_id, model_id = model.split("/")
    assert list(config) == ["provider"] and list(config["provider"]) == [provider_id]
    block = config["provider"][provider_id]
    assert block["npm"] == "@ai-sdk/openai-compatible"
    assert block["options"] == {"baseURL": base_url, "apiKey": "{env:ZHIPU_API_KEY}"}
    assert (
        list(block["models"]) == [model_id]
        and block["models"][model_id]["name"] == model_id.upper()
    )
    assert SECRET not in json.dumps(config)


def test_the_block_uses_the_variable_resolution_found() -> None:
    kwargs = opencode_agent_kwargs("zai/glm-4.6", ["ZAI_API_KEY"])
    assert kwargs["opencode_config"]["provider"]["zai"]["options"]["apiKey"] == "{env:ZAI_API_KEY}"
    assert opencode_agent_kwargs("anthropic/claude-opus-4-1", ["ANTHROPIC_API_KEY"]) == {}
    assert opencode_agent_kwargs("zai/glm-4.6", []) == {}


@pytest.mark.parametrize(
    ("model", "var", "message"),
    [
        ("openai/gpt-5", "OPENAI_API_KEY", "not a GLM model"),
        ("zai", "ZHIPU_API_KEY", "not a GLM model"),
        ("zai/glm-4.6", SECRET, "not an environment variable name"),
        ("zai/glm-4.6", "X; rm -rf /", "not an environment variable name"),
    ],
)
def test_bad_inputs_are_refused(model: str, var: str, message: str) -> None:
    with pytest.raises(OpenCodeConfigError, match=message):
        opencode_provider_config(model, var)


def _config_written_by(agent) -> dict:
    command = agent._build_register_config_command()  # Harbor 0.26's opencode.json writer
    assert command is not None and SECRET not in command
    payload = command.split("echo ", 1)[1].rsplit(" > ", 1)[0]
    return json.loads(shlex.split(payload)[0])


def test_harbors_opencode_agent_writes_the_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harbor.agents.factory import AgentFactory
    from harbor.models.trial.config import AgentConfig

    monkeypatch.setenv("ZHIPU_API_KEY", SECRET)
    config = AgentConfig(
        name="opencode",
        model_name="zai-coding-plan/glm-4.6",
        env={"ZHIPU_API_KEY": "${ZHIPU_API_KEY}"},
        kwargs=opencode_agent_kwargs("zai-coding-plan/glm-4.6", ["ZHIPU_API_KEY"]),
    )
    AgentFactory.run_preflight(config)
    agent = AgentFactory.create_agent_from_config(config, logs_dir=tmp_path)
    assert agent._execution_model_name() == "zai-coding-plan/glm-4.6"
    written = _config_written_by(agent)["provider"]["zai-coding-plan"]
    assert written["options"]["apiKey"] == "{env:ZHIPU_API_KEY}"
    assert written["options"]["baseURL"] == "https://api.z.ai/api/coding/paas/v4"
    # The key itself reaches OpenCode's process through the agent's environment overlay.
    assert agent.extra_env["ZHIPU_API_KEY"] == SECRET


def test_the_reprompt_wrapper_passes_the_block_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posttrainbench.host.agents.reprompt import RepromptingAgent

    monkeypatch.setenv("ZHIPU_API_KEY", SECRET)
    agent = RepromptingAgent(
        logs_dir=tmp_path,
        model_name="zai/glm-4.6",
        inner="opencode",
        extra_env={"ZHIPU_API_KEY": SECRET},
        **opencode_agent_kwargs("zai/glm-4.6", ["ZHIPU_API_KEY"]),
    )
    assert agent.to_agent_info().name == "opencode+reprompt"
    assert _config_written_by(agent.inner)["provider"]["zai"]["npm"] == "@ai-sdk/openai-compatible"
