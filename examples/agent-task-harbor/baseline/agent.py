"""Baseline candidate agent: a Harbor agent class the task's agent should improve.

It only knows one word; an improved agent reads the word from the instruction.
"""

from harbor.agents.base import BaseAgent


class CandidateAgent(BaseAgent):
    """Writes 'alpha' whatever the instruction asks."""

    @staticmethod
    def name() -> str:
        return "baseline-echo"

    def version(self) -> str:
        return "1"

    async def setup(self, environment) -> None:
        pass

    async def run(self, instruction, environment, context) -> None:
        await environment.exec("echo alpha > /app/answer.txt")
