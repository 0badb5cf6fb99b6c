"""Improved candidate agent (the task's scripted oracle commits it): writes the word the
instruction asks for, not always 'alpha'."""

import re
import shlex

from harbor.agents.base import BaseAgent


class CandidateAgent(BaseAgent):
    """Reads the quoted word from the instruction and writes it to /app/answer.txt."""

    @staticmethod
    def name() -> str:
        return "improved-echo"

    def version(self) -> str:
        return "2"

    async def setup(self, environment) -> None:
        pass

    async def run(self, instruction, environment, context) -> None:
        match = re.search(r"'([^']+)'", instruction)
        word = match.group(1) if match else "alpha"
        await environment.exec(f"printf '%s' {shlex.quote(word)} > /app/answer.txt")
