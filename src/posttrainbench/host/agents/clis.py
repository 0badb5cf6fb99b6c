"""Which Harbor agents are agent CLIs, and which npm package and command each is: the one
home of these agent facts (``data/agent_clis.json``). The versions the tasks install are
the GPU image's pins (``posttrainbench.host.tasks.gpu_image``)."""

from __future__ import annotations

import functools
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class AgentCli(BaseModel):
    """One agent CLI: its npm package and the command it puts on PATH."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str = Field(min_length=1)
    command: str = Field(pattern=r"^[a-z][a-z0-9-]*$")


@functools.cache
def agent_clis() -> dict[str, AgentCli]:
    """Harbor agent name -> its CLI (validated once, then cached)."""
    source = resources.files("posttrainbench.host.agents").joinpath("data", "agent_clis.json")
    return TypeAdapter(dict[str, AgentCli]).validate_json(source.read_text())


def is_agent_cli(agent_name: str) -> bool:
    """Whether a Harbor agent name runs one of the agent CLIs (the tasks carry them)."""
    return agent_name in agent_clis()
