"""Where things live inside a compiled agent task (one home for these paths: the compiler
renders them into the templates, the verifier and the audit read them from here)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.core.secrets_file import SECRETS_DIR

# The same trusted tree as a model task's.
_ROOT = MODEL_LAYOUT.root


class TaskLayout(BaseModel):
    """The paths of a compiled agent task's environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = "/app"  # the agent's git repository (its working directory)
    service_root: str = "/var/lib/ptb-agent-task"  # root-only: state/, service.log, service.pid
    runs_root: str = "/var/lib/ptb-runs"  # root's, 0711: one directory per candidate run
    root: str = _ROOT  # the task's trusted tree (environment/ptb/ of the task dir)
    private: str = f"{_ROOT}/agent-task/private"  # root-only: config, every split, the baseline
    lib: str = f"{_ROOT}/lib"  # the service's code
    venv: str = f"{_ROOT}/venv"  # the service's Python environment
    python: str = f"{_ROOT}/venv/bin/python"  # its interpreter
    tests: str = "/tests"  # the verifier's sealed code (uploaded by Harbor)
    verifier_out: str = "/logs/verifier"  # reward.json and the verifier's records
    secrets_dir: str = SECRETS_DIR

    @property
    def state(self) -> str:
        """The service's state directory (ledger, candidates, token, issued uids)."""
        return f"{self.service_root}/state"

    @property
    def nested_cache(self) -> str:
        """Mode B: the layer cache of the nested jobs' local sandboxes (root's)."""
        return f"{self.service_root}/nested-cache"

    @property
    def config(self) -> str:
        """The task's private config."""
        return f"{self.private}/task.yaml"

    def agent_writable(self, agent_home: str) -> list[str]:
        """Directories the agent may write that a candidate must not reach."""
        return ["/tmp", "/var/tmp", "/dev/shm", self.repo, agent_home, "/logs/agent"]


LAYOUT = TaskLayout()
