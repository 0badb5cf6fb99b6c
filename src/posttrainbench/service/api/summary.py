"""What ``/finalize`` returns and the trusted final scoring reads: candidates, evaluations,
submission and budget use of one service."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.service.api.ledger import Charge, Ledger, Usage
from posttrainbench.service.shared.candidates import CandidateRepo
from posttrainbench.service.shared.config import AgentTaskConfig
from posttrainbench.service.shared.registry import Registry, RegistryFile


class StatePaths:
    """The files of one service state directory (mode 0700, owned by the service's user)."""

    def __init__(self, state_dir: Path):
        self.root = Path(state_dir)
        self.ledger = self.root / "ledger.json"
        self.registry = self.root / "candidates.json"
        self.repo = self.root / "candidates.git"
        self.dataset = self.root / "dataset"
        self.token = self.root / "admin_token"
        self.identities = self.root / "identities.json"
        self.final = self.root / "final"  # final scoring's own output, before it is published


class ServiceSummary(BaseModel):
    """The service's whole record, as the final scoring needs it."""

    model_config = ConfigDict(extra="forbid")

    task: str
    reward_mode: str
    selection_split: str | None
    registry: RegistryFile
    charges: list[Charge]
    usage: dict[str, Usage]


def open_registry(paths: StatePaths) -> Registry:
    """The registry of a state directory (its bare repository is created on first fetch)."""
    return Registry(paths.registry, CandidateRepo(paths.repo))


def summarize(config: AgentTaskConfig, registry: RegistryFile, ledger: Ledger) -> ServiceSummary:
    """Bundle *registry* and the ledger's charges into one summary."""
    return ServiceSummary(
        task=config.name,
        reward_mode=config.reward.mode.value,
        selection_split=config.reward.selection_split,
        registry=registry,
        charges=ledger.charges(),
        usage=ledger.usage(),
    )


def read_state(config: AgentTaskConfig, state_dir: Path) -> ServiceSummary:
    """The summary straight from a state directory (the verifier runs beside the service)."""
    paths = StatePaths(state_dir)
    if not paths.root.is_dir():  # the service never started: no candidates, nothing spent
        return ServiceSummary(
            task=config.name,
            reward_mode=config.reward.mode.value,
            selection_split=config.reward.selection_split,
            registry=RegistryFile(),
            charges=[],
            usage={},
        )
    return summarize(config, open_registry(paths).snapshot(), Ledger(paths.ledger, config.splits))
