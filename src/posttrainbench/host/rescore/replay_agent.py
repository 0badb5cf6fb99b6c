"""The agent of a re-score trial: it puts a stored run's files back and stops.

Harbor runs it like any agent, so everything after it is a normal trial of the current
task: the collect hook hands ``/app/final_model`` to the verifier in its own environment,
the judges read the restored code snapshot as the agent's workspace, and the trial
directory exports like any other (posttrainbench.host.results.rescore_origin links it to the
run it scores again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

import posttrainbench
from posttrainbench.host.results.rescore_origin import ORIGIN_KWARG, REPLAY_AGENT_NAME

IMPORT_PATH = f"{__name__}:ReplayAgent"
WORKSPACE = "/app"


class ReplayAgent(BaseAgent):
    """Uploads a stored final_model (and the run's code snapshot) into the workspace."""

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        *,
        final_model: str,
        snapshot: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop(ORIGIN_KWARG, None)  # read back from the trial's config by the export
        super().__init__(logs_dir, model_name, **kwargs)
        self._final_model = Path(final_model)
        self._snapshot = Path(snapshot) if snapshot else None

    @staticmethod
    def name() -> str:
        return REPLAY_AGENT_NAME

    def version(self) -> str:
        return posttrainbench.__version__

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        if self._snapshot is not None and self._snapshot.is_dir():
            await environment.upload_dir(self._snapshot, WORKSPACE)
        await environment.upload_dir(self._final_model, f"{WORKSPACE}/final_model")
