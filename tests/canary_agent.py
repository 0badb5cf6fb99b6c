"""A test-only Harbor agent that leaks every secret it can reach, everywhere it can.

`tests/integration/test_secret_canary.py` runs it through a real trial
(`ptb run -a tests.canary_agent:CanaryAgent`) and then checks that the scrub left no
secret anywhere in the run directory. It echoes: the values Harbor handed it
(`extra_env`), secret-looking and `PTB_CANARY_*` variables of the host process, and
the content of a credential file named by its environment (`CODEX_AUTH_JSON_PATH`),
into its host-side log, its ATIF trajectory and its context metadata (`result.json`),
and, inside the sandbox, into /logs/agent and a file in /app that the code snapshot
collects.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext


def _reachable_secrets(extra_env: dict[str, str]) -> dict[str, str]:
    found = {f"extra_env:{k}": v for k, v in extra_env.items() if v}
    for name, value in os.environ.items():
        upper = name.upper()
        if value and (upper.startswith("PTB_CANARY") or upper.endswith(("_API_KEY", "_TOKEN"))):
            found[f"host:{name}"] = value
    auth_path = extra_env.get("CODEX_AUTH_JSON_PATH") or os.environ.get("CODEX_AUTH_JSON_PATH")
    if auth_path and Path(auth_path).is_file():
        found["file:auth.json"] = Path(auth_path).read_text()
    return found


class CanaryAgent(BaseAgent):
    """Leaks its secrets into logs, trajectory, context and the workspace."""

    @staticmethod
    def name() -> str:
        return "ptb-canary"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        secrets = _reachable_secrets(self._extra_env)
        blob = "\n".join(f"{name}={value}" for name, value in sorted(secrets.items()))
        # Whether Harbor's overlay hid the API key from the agent (the test checks it).
        blanked = {k: v == "" for k, v in self._extra_env.items() if k.endswith("_API_KEY")}
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "canary.log").write_text(f"{blob}\nblanked={json.dumps(blanked)}\n")
        trajectory = {
            "schema_version": "ATIF-v1.6",
            "session_id": "canary",
            "agent": {"name": self.name(), "version": self.version()},
            "steps": [
                {"step_id": 1, "source": "user", "message": instruction[:200]},
                {"step_id": 2, "source": "agent", "message": f"my secrets are:\n{blob}"},
            ],
        }
        (self.logs_dir / "trajectory.json").write_text(json.dumps(trajectory, indent=2))
        context.metadata = {"secrets": secrets, "blanked": blanked}
        # Inside the sandbox, the way a real CLI agent would receive and echo its keys.
        result = await environment.exec(
            "mkdir -p /logs/agent && printf '%s\\n' \"$CANARY_BLOB\" | tee /logs/agent/sandbox-echo.txt"
            " > /app/leaked_notes.txt && env > /logs/agent/sandbox-env.txt"
            f" && echo {shlex.quote('done')}",
            env={"CANARY_BLOB": blob, **{k: v for k, v in self._extra_env.items() if v}},
        )
        if result.return_code != 0:
            raise RuntimeError(f"canary exec failed: {result.stderr}")
