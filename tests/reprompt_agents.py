"""Test-only Harbor agents for the re-prompting wrapper: they stop at once, every time.

`StoppingAgent` appends one JSON line per run to `/logs/agent/rounds.txt` inside the
environment (which prompt it got), optionally moves the task's clock stamp back by
`advance_minutes` (as if that much time had passed, so a test can cross the
re-prompt minimum deterministically) and reports `tokens_per_round` input tokens and
`cost_per_round` dollars in its context, so a test can check the wrapper's sums.
`ResumingStoppingAgent` is the same agent declaring Harbor's `resume` capability.
"""

from __future__ import annotations

import json
import shlex

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

ROUNDS_FILE = "/logs/agent/rounds.txt"
STAMP = "/logs/agent/ptb_start_time"


class StoppingAgent(BaseAgent):
    """Records the prompt it got and returns immediately."""

    def __init__(
        self,
        *args,
        advance_minutes: float = 0.0,
        tokens_per_round: int = 0,
        cost_per_round: float = 0.0,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.advance_minutes = advance_minutes
        self.tokens_per_round = tokens_per_round
        self.cost_per_round = cost_per_round
        self.setups = 0
        self.calls: list[tuple[str, str]] = []  # (method, prompt), for in-process tests

    @staticmethod
    def name() -> str:
        return "ptb-test-stopping"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        self.setups += 1
        await environment.exec("mkdir -p /logs/agent && echo setup >> /logs/agent/setups.txt")

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        await self._round("run", instruction, environment, context)

    async def _round(
        self, method: str, prompt: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        self.calls.append((method, prompt))
        line = json.dumps(
            {
                "method": method,
                "head": prompt.strip().splitlines()[0][:120],
                "has_instruction": "Write 'done'" in prompt,
            }
        )
        command = f"printf '%s\\n' {shlex.quote(line)} >> {ROUNDS_FILE}"
        if self.advance_minutes:
            seconds = int(self.advance_minutes * 60)
            command += f" && s=$(cat {STAMP}) && echo $((s - {seconds})) > {STAMP}"
        result = await environment.exec(command)
        if result.return_code != 0:
            raise RuntimeError(f"stopping agent exec failed: {result.stderr}")
        if self.tokens_per_round:
            context.n_input_tokens = self.tokens_per_round
            context.n_output_tokens = self.tokens_per_round // 10
        if self.cost_per_round:
            context.cost_usd = self.cost_per_round


class ResumingStoppingAgent(StoppingAgent):
    """The same, declaring that it can resume its own session."""

    capabilities = AgentCapabilities(resume=True)

    async def resume(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        await self._round("resume", instruction, environment, context)


class FailingAgent(StoppingAgent):
    """Raises on its second run (a crashed CLI)."""

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        await super().run(instruction, environment, context)
        if len(self.calls) >= 2:
            raise RuntimeError("inner agent crashed")
