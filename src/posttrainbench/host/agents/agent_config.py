"""Harbor's AgentConfig for one agent of `ptb run`/`ptb sweep`, optionally re-prompted.

One place that knows how an agent name, its model, the resolved credentials and the
re-prompt minimum become Harbor's `AgentConfig`: a plain Harbor agent (or
`module:Class`), OpenCode with its GLM provider block, or any of them wrapped in
:class:`posttrainbench.host.agents.reprompt.RepromptingAgent`.
"""

from __future__ import annotations

from typing import Any

from harbor.models.trial.config import AgentConfig

from posttrainbench.host.agents.opencode_glm import opencode_agent_kwargs
from posttrainbench.host.agents.preinstalled import IMPORT_PATHS as PREINSTALLED
from posttrainbench.host.agents.reprompt import inner_agent_class
from posttrainbench.host.agents.reprompt_policy import DEFAULT_MAX_REPROMPTS, RepromptSettings

REPROMPT_IMPORT_PATH = "posttrainbench.host.agents.reprompt:RepromptingAgent"


def build_agent_config(
    agent: str,
    agent_model: str | None,
    env: dict[str, str] | None = None,
    *,
    key_vars: list[str] | None = None,
    reprompt_min_minutes: float | None = None,
    max_reprompts: int = DEFAULT_MAX_REPROMPTS,
) -> AgentConfig:
    """The AgentConfig for `agent` (a Harbor name or `module:Class`) and `agent_model`.

    `env` is the credential overlay (`ResolvedCredentials.agent_env`) and `key_vars` the
    API-key variables resolution found (`summary.variables`), which name the key in
    OpenCode's GLM provider block. With `reprompt_min_minutes` the agent is wrapped in
    the re-prompting agent (credentials stay those of the inner agent).
    """
    kwargs: dict[str, Any] = {}
    if agent == "opencode":
        kwargs.update(opencode_agent_kwargs(agent_model, list(key_vars or [])))
    if reprompt_min_minutes is not None:
        settings = RepromptSettings(
            inner=agent, min_remaining_minutes=reprompt_min_minutes, max_reprompts=max_reprompts
        )
        inner_agent_class(agent)  # one clear error for an unknown or already wrapped agent
        return AgentConfig(
            import_path=REPROMPT_IMPORT_PATH,
            model_name=agent_model,
            env=env or {},
            kwargs={**settings.model_dump(exclude_none=True), **kwargs},
        )
    if ":" in agent or agent in PREINSTALLED:
        return AgentConfig(
            import_path=PREINSTALLED.get(agent, agent),
            model_name=agent_model,
            env=env or {},
            kwargs=kwargs,
        )
    return AgentConfig(name=agent, model_name=agent_model, env=env or {}, kwargs=kwargs)
