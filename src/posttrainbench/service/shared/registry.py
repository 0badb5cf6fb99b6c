"""The service's record of candidates, their evaluations and the final submission.

Stored as ``candidates.json`` beside the ledger (same lock discipline); the commits
themselves live in the bare repository of ``candidates.CandidateRepo``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.service.shared.candidates import CandidateRepo
from posttrainbench.service.shared.errors import CandidateError
from posttrainbench.service.shared.locked_json import exclusive, read_model, write_model


def _now() -> str:
    return datetime.now(UTC).isoformat()


class CandidateRecord(BaseModel):
    """One distinct commit the agent asked to evaluate or submit."""

    model_config = ConfigDict(extra="forbid")

    id: int
    ref: str
    sha: str
    requested: str = Field(description="what the agent passed (commit id or ref name)")
    time: str

    @property
    def label(self) -> str:
        """The name used in the ledger and in responses."""
        return f"candidate-{self.id}"


class EvaluationRecord(BaseModel):
    """The outcome of one evaluation (kept for auto-best selection)."""

    model_config = ConfigDict(extra="forbid")

    eval_id: int
    candidate: int
    sha: str
    split: str
    n: int
    mean: float
    status: str
    time: str


class Submission(BaseModel):
    """The agent's final answer in reward mode ``submit`` (the latest wins)."""

    model_config = ConfigDict(extra="forbid")

    candidate: int
    sha: str
    time: str


class RegistryFile(BaseModel):
    """``candidates.json``: everything the trusted final scoring needs besides the commits."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    candidates: list[CandidateRecord] = Field(default_factory=list)
    evaluations: list[EvaluationRecord] = Field(default_factory=list)
    submission: Submission | None = None
    finalized_at: str | None = None

    def candidate(self, candidate_id: int) -> CandidateRecord:
        """The record with *candidate_id*."""
        for record in self.candidates:
            if record.id == candidate_id:
                return record
        raise CandidateError(f"no candidate {candidate_id}")


class Registry:
    """Candidates and evaluations of one service, persisted under its state directory."""

    def __init__(self, path: Path, repo: CandidateRepo):
        self.path = Path(path)
        self.repo = repo

    def register(self, source: Path, spec: str) -> CandidateRecord:
        """Fetch *spec* from *source*; a commit seen before keeps its candidate number."""
        incoming = f"refs/ptb/incoming/{uuid.uuid4().hex}"
        sha = self.repo.fetch(source, spec, incoming)  # outside the lock: fetches may overlap
        try:
            with exclusive(self.path):
                state = read_model(self.path, RegistryFile)
                for record in state.candidates:
                    if record.sha == sha:
                        return record
                number = len(state.candidates) + 1
                record = CandidateRecord(
                    id=number,
                    ref=f"refs/ptb/candidates/{number}",
                    sha=sha,
                    requested=spec,
                    time=_now(),
                )
                self.repo.pin(sha, record.ref)
                state.candidates.append(record)
                write_model(self.path, state)
                return record
        finally:
            self.repo.delete_ref(incoming)

    def record_evaluation(
        self, candidate: CandidateRecord, split: str, n: int, mean: float, status: str
    ) -> EvaluationRecord:
        """Append one evaluation's outcome."""
        with exclusive(self.path):
            state = read_model(self.path, RegistryFile)
            record = EvaluationRecord(
                eval_id=len(state.evaluations) + 1,
                candidate=candidate.id,
                sha=candidate.sha,
                split=split,
                n=n,
                mean=mean,
                status=status,
                time=_now(),
            )
            state.evaluations.append(record)
            write_model(self.path, state)
            return record

    def submit(self, candidate: CandidateRecord) -> Submission:
        """Record *candidate* as the final submission."""
        with exclusive(self.path):
            state = read_model(self.path, RegistryFile)
            state.submission = Submission(candidate=candidate.id, sha=candidate.sha, time=_now())
            write_model(self.path, state)
            return state.submission

    def finalize(self) -> RegistryFile:
        """Close the registry (no more evaluations or submissions) and return it."""
        with exclusive(self.path):
            state = read_model(self.path, RegistryFile)
            if state.finalized_at is None:
                state.finalized_at = _now()
                write_model(self.path, state)
            return state

    def snapshot(self) -> RegistryFile:
        """The registry as it is now."""
        with exclusive(self.path):
            return read_model(self.path, RegistryFile)
