"""A test-only Harbor agent that tries every judge evasion of issue 15 in one real trial.

It uploads :mod:`tests.security.hostile_judges_payload` into the sandbox and runs it as
the agent (whoever Harbor runs the agent as: root or the task's unprivileged user), with
the task's own Python. ``tests/security/test_judges_hostile_trial.py`` runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from posttrainbench.core.model_task_layout import MODEL_LAYOUT

PAYLOAD = Path(__file__).with_name("hostile_judges_payload.py")
SANDBOX_PAYLOAD = "/tmp/ptb_hostile_judges.py"
JUNK_MB = 40


class HostileJudgesAgent(BaseAgent):
    """Hides test data, plants a decoy shard and an answer template, dumps junk."""

    @staticmethod
    def name() -> str:
        return "ptb-hostile-judges"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        await environment.upload_file(PAYLOAD, SANDBOX_PAYLOAD)
        result = await environment.exec(
            f"{MODEL_LAYOUT.python} {SANDBOX_PAYLOAD} bfcl {JUNK_MB} {MODEL_LAYOUT.base_model}"
        )
        if result.return_code != 0:
            raise RuntimeError(f"hostile payload failed: {result.stderr}")
        report = json.loads((result.stdout or "").strip().splitlines()[-1])
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "hostile_report.json").write_text(json.dumps(report, indent=2))
        context.metadata = report
