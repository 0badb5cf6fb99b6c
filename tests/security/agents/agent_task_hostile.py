"""A hostile Harbor agent for agent tasks: every attack on the trust boundary in one trial.

It uploads ``agent_task_payload/`` into the sandbox and runs ``attack.py`` there as the
agent's user (see that file for the attacks; the candidate it commits is ``solve.py`` with
its persistent helper ``racer.py``; ``listener.py`` is the daemon it leaves behind). The
security test then checks the reward, the audit and what came back to the agent.
"""

from __future__ import annotations

from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

PAYLOAD = Path(__file__).resolve().parent / "agent_task_payload"
SANDBOX_DIR = "/opt/ptb-hostile"  # a fresh top-level dir: nothing of the task lives there


class HostileAgentTaskAgent(BaseAgent):
    """Attacks the agent task's service, verifier and final scoring from the agent's side."""

    @staticmethod
    def name() -> str:
        return "ptb-hostile-agent-task"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        await environment.upload_dir(PAYLOAD, SANDBOX_DIR)

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        result = await environment.exec(
            f"python3 {SANDBOX_DIR}/attack.py > /logs/agent/attack.log 2>&1", timeout_sec=600
        )
        context.metadata = {"attack_exit_code": result.return_code}
