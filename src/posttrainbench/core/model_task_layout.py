"""Where things live inside a compiled model task (one home for these paths: the compiler
renders them into the templates; the sandboxes, the evaluation, the judges and the agents'
time probe read them from here). The agent task's are in
:mod:`posttrainbench.core.agent_task_layout`.

``/opt/ptb`` is the task's trusted tree: root's, read-only to the agent's user, built at
image build time (in the local sandbox: cached layers stacked there). The agent works in
``/app``; the verifier reads its sealed code and data from ``/tests`` (uploaded by Harbor)
and writes ``/logs/verifier``; the collect hook hands over through ``/logs/artifacts``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ModelTaskLayout(BaseModel):
    """The paths of a compiled model task's environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: str = "/opt/ptb"  # the task's trusted tree (environment/ptb/ of the task dir)
    workspace: str = "/app"  # the agent's working directory (environment/workspace/)
    tests: str = "/tests"  # the verifier's sealed code and test data (the task's tests/)
    logs: str = "/logs"  # Harbor's log dirs (root's)
    agent_clis: str = "/opt/agent-clis"  # the pinned agent CLIs (GPU image; sandbox: bound)

    def under(self, rel: str) -> str:
        """``rel`` below the root (``''``: the root itself, with a trailing slash)."""
        return f"{self.root}/{rel}"

    @property
    def lib(self) -> str:
        """The task's copy of the evaluation code (its PYTHONPATH)."""
        return self.under("lib")

    @property
    def venv(self) -> str:
        """The task's Python environment (on the agent's PATH)."""
        return self.under("venv")

    @property
    def venv_bin(self) -> str:
        """The venv's bin directory."""
        return f"{self.venv}/bin"

    @property
    def python(self) -> str:
        """The venv's interpreter."""
        return f"{self.venv_bin}/python"

    @property
    def requirements(self) -> str:
        """The venv's requirements.txt."""
        return self.under("requirements.txt")

    @property
    def data(self) -> str:
        """The agent's copy of its feedback split (none in feedback mode ``none``)."""
        return self.under("data")

    @property
    def contamination_reference(self) -> str:
        """The contamination checker's default reference (feedback mode ``test``)."""
        return f"{self.data}/contamination_reference.json"

    @property
    def models(self) -> str:
        """The models directory."""
        return self.under("models")

    @property
    def base_model(self) -> str:
        """The base model (a ``transformers`` directory, or a link into the shared cache)."""
        return f"{self.models}/base"

    @property
    def task_file(self) -> str:
        """task.json, the typed task description."""
        return self.under("task.json")

    @property
    def tiktoken(self) -> str:
        """The cl100k_base tokenizer file's directory (sandboxes have no network)."""
        return self.under("tiktoken")

    @property
    def start_script(self) -> str:
        """The healthcheck hook: the agent's user, the monitor, the clock."""
        return self.under("start.sh")

    @property
    def collect_script(self) -> str:
        """The collect hook: stops the agent, hands final_model and snapshots over."""
        return self.under("collect.sh")

    @property
    def monitor_script(self) -> str:
        """The system monitor."""
        return self.under("monitor.sh")

    @property
    def base_model_script(self) -> str:
        """Puts the base model in place (links it from the shared cache volume)."""
        return self.under("base_model.sh")

    @property
    def verifier_out(self) -> str:
        """reward.json and the verifier's records."""
        return f"{self.logs}/verifier"

    @property
    def artifacts(self) -> str:
        """What the collect hook hands to the verifier (final_model, snapshots, the monitor's log)."""
        return f"{self.logs}/artifacts"

    @property
    def agent_logs(self) -> str:
        """Harbor's agent logs (sticky, 1777: the agent writes here, root's files stay root's)."""
        return f"{self.logs}/agent"

    @property
    def final_model(self) -> str:
        """Where the agent saves the model it submits."""
        return f"{self.workspace}/final_model"

    @property
    def clock(self) -> str:
        """The agent's clock: epoch seconds of its start, root's (start.sh writes it)."""
        return f"{self.agent_logs}/ptb_start_time"

    @property
    def monitor_log(self) -> str:
        """The system monitor's log."""
        return f"{self.artifacts}/system_monitor.log"

    @property
    def tests_lib(self) -> str:
        """The verifier's sealed copy of the evaluation code."""
        return f"{self.tests}/lib"

    @property
    def tests_data(self) -> str:
        """The sealed test data."""
        return f"{self.tests}/data"

    @property
    def tests_task_file(self) -> str:
        """The verifier's copy of task.json."""
        return f"{self.tests}/task.json"

    @property
    def agent_clis_bin(self) -> str:
        """The agent CLIs' bin directory (on every user's PATH)."""
        return f"{self.agent_clis}/node_modules/.bin"

    def paths(self) -> dict[str, str]:
        """Every path of the layout by name (fields and derived paths)."""
        names = [
            name
            for name, value in vars(type(self)).items()
            if isinstance(value, property) and not name.startswith("_")
        ]
        return {**self.model_dump(), **{name: getattr(self, name) for name in names}}


MODEL_LAYOUT = ModelTaskLayout()
