"""A Harbor agent that runs one command and records when it returned (host clock).

The bench's measure of "time to the agent's first command": everything before it (the
environment's layers built or found, the sandbox started, the healthcheck that creates
the agent's user and starts its clock, the agent's setup) is what a real agent waits for.
"""

from __future__ import annotations

import json
import time

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

STAMP_FILE = "first_command.json"


class FirstCommandAgent(BaseAgent):
    """Runs ``id -un`` as the task's agent user, writes ``first_command.json``, stops."""

    @staticmethod
    def name() -> str:
        """Identifier of this agent."""
        return "ptb-bench-first-command"

    def version(self) -> str:
        """Version of this agent."""
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        """Nothing to install."""

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        """The first command, then the stamp (after it returned: it ran)."""
        result = await environment.exec("id -un")
        stamp = {"at": time.time(), "user": result.stdout.strip(), "rc": result.return_code}
        (self.logs_dir / STAMP_FILE).write_text(json.dumps(stamp))
