"""OpenCode with Zhipu's GLM models: `ptb sweep -a opencode:zai/glm-4.6`.

OpenCode takes its providers from models.dev, where Zhipu's GLM models are served by
three providers that all read `ZHIPU_API_KEY`: `zai` (Z.AI, pay as you go),
`zai-coding-plan` (the GLM Coding Plan subscription endpoint) and `zhipuai` (the
mainland-China platform). Harbor's opencode agent writes only a `models` entry for
them (and an `apiKey` only for LiteLLM's `ZAI_API_KEY`), so a run would depend on the
models.dev snapshot of the OpenCode build and on which key variable is set. This module
renders a complete provider block (npm package, base URL, model, `apiKey` as an
`{env:VAR}` reference, never a value) that goes to Harbor's opencode agent as its
`opencode_config` kwarg; Harbor merges it into `~/.config/opencode/opencode.json`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.errors import PtbError
from posttrainbench.host.agents.templates import render

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class OpenCodeConfigError(PtbError):
    """The OpenCode provider block cannot be built (bad model or key variable name)."""


class GlmProvider(BaseModel):
    """One OpenCode provider that serves GLM models (as models.dev describes it)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    base_url: str
    npm: str = "@ai-sdk/openai-compatible"
    key_vars: tuple[str, ...]


GLM_PROVIDERS: dict[str, GlmProvider] = {
    provider.id: provider
    for provider in (
        GlmProvider(
            id="zai",
            name="Z.AI",
            base_url="https://api.z.ai/api/paas/v4",
            key_vars=("ZHIPU_API_KEY", "ZAI_API_KEY"),
        ),
        GlmProvider(
            id="zai-coding-plan",
            name="Z.AI Coding Plan",
            base_url="https://api.z.ai/api/coding/paas/v4",
            key_vars=("ZHIPU_API_KEY", "ZAI_API_KEY"),
        ),
        GlmProvider(
            id="zhipuai",
            name="Zhipu AI",
            base_url="https://open.bigmodel.cn/api/paas/v4",
            key_vars=("ZHIPU_API_KEY",),
        ),
    )
}


def glm_provider(agent_model: str | None) -> GlmProvider | None:
    """The GLM provider of an OpenCode `provider/model` selector, if it is one."""
    provider, _, model = (agent_model or "").partition("/")
    return GLM_PROVIDERS.get(provider.lower()) if model else None


def opencode_provider_config(agent_model: str, api_key_var: str) -> dict[str, Any]:
    """The `opencode_config` dict for a GLM model, its key referenced as `{env:VAR}`."""
    provider = glm_provider(agent_model)
    if provider is None:
        known = ", ".join(f"{p}/<model>" for p in GLM_PROVIDERS)
        raise OpenCodeConfigError(f"{agent_model!r} is not a GLM model for OpenCode; use {known}")
    if not _ENV_NAME.match(api_key_var):
        raise OpenCodeConfigError(f"{api_key_var!r} is not an environment variable name")
    model = agent_model.partition("/")[2]
    text = render(
        "opencode_glm_provider.json.j2",
        provider=provider,
        model=model,
        model_name=model.upper(),
        api_key_ref=f"{{env:{api_key_var}}}",
    )
    return json.loads(text)


def opencode_agent_kwargs(agent_model: str | None, key_vars: list[str]) -> dict[str, Any]:
    """Harbor AgentConfig kwargs for opencode with `agent_model`: the GLM provider block
    (keyed on the first of `key_vars`, the variables credential resolution found), or
    nothing for other providers."""
    if glm_provider(agent_model) is None or not key_vars:
        return {}
    return {"opencode_config": opencode_provider_config(agent_model or "", key_vars[0])}
