"""A hostile Harbor agent for model tasks: it runs the runtime attacks of issue 15 in one trial.

``HostileModelAgent`` runs one of the attack scripts beside this module as the task's
agent user (``attack=runtime`` or ``attack=resources``) with the host's canary paths and
ports in its environment, keeps what the script printed (``key=value`` lines) in its
host-side log ``attacks.txt``, and then (``wait_for_deadline``) sleeps until Harbor
cuts it off at the agent's timeout, leaving its daemons behind.
"""

from __future__ import annotations

from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

SCRIPTS = {
    "runtime": "model_task_runtime_attacks.sh",
    "resources": "model_task_resource_attacks.sh",
}
REPORT_FILE = "attacks.txt"


def parse_report(text: str) -> dict[str, str]:
    """The ``key=value`` lines a script printed (the last value of a key wins)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


class HostileModelAgent(BaseAgent):
    """Attacks the sandbox, the host and the deadline; submits the base model as its own."""

    def __init__(
        self,
        *args,
        attack: str = "runtime",
        canary_file: str = "",
        canary_dir: str = "",
        loopback_port: int = 0,
        outside_host: str = "",
        outside_port: int = 0,
        abstract_name: str = "ptb-security-canary",
        wait_for_deadline: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.attack = attack
        self.attack_env = {
            "CANARY_FILE": canary_file,
            "CANARY_DIR": canary_dir,
            "LOOPBACK_PORT": str(loopback_port),
            "OUTSIDE_HOST": outside_host,
            "OUTSIDE_PORT": str(outside_port),
            "ABSTRACT_NAME": abstract_name,
        }
        self.wait_for_deadline = wait_for_deadline

    @staticmethod
    def name() -> str:
        return "ptb-hostile-model-agent"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        script = (Path(__file__).parent / SCRIPTS[self.attack]).read_text()
        result = await environment.exec(script, env=self.attack_env, timeout_sec=300)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / REPORT_FILE).write_text(
            f"{result.stdout or ''}\nscript_rc={result.return_code}\n"
            f"--- stderr\n{result.stderr or ''}"
        )
        if self.wait_for_deadline:
            await environment.exec("sleep 3600")
