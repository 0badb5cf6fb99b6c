"""The budgeted evaluation service (FastAPI): ``/status``, ``/eval``, ``/submit``, ``/finalize``.

One ``EvaluationService`` holds the logic (only its admin check speaks HTTP);
``create_app`` maps it onto routes and its typed errors onto status codes. The state
directory (mode 0700) holds the ledger, the candidate registry, the bare candidate
repository, the issued candidate uids, the service's own copy of the evaluable splits
and, unless placed elsewhere, the admin token.

Every candidate run is contained (``candidate_run``): when it ends, nothing of its uid runs
and its directory is gone. An aggregate-only evaluation runs alone (``eval_gate``), so no
other candidate can watch it and repeat what it saw in a viewable answer. ``/finalize``
waits for the requests in flight.
"""

from __future__ import annotations

import hmac
import os
import random
import secrets
import stat
import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.errors import PtbError
from posttrainbench.service.api.eval_gate import EvalGate
from posttrainbench.service.api.ledger import Ledger
from posttrainbench.service.api.scoring import (
    Containment,
    copy_evaluable,
    load_samples,
    nested_root,
    score_candidate,
)
from posttrainbench.service.api.summary import ServiceSummary, StatePaths, open_registry, summarize
from posttrainbench.service.shared.candidates import CandidateRepo
from posttrainbench.service.shared.config import AgentTaskConfig, RewardMode, ScoringModeB, Tier
from posttrainbench.service.shared.dataset import Sample
from posttrainbench.service.shared.errors import (
    BudgetExhausted,
    CandidateError,
    RequestRefused,
    ServiceClosed,
    ServiceStateError,
    SplitAccessError,
)
from posttrainbench.service.shared.identity import IdentityPool
from posttrainbench.service.shared.runas import prepare_runs_root

DRAIN_GRACE_S = 60.0  # beyond one evaluation's timeout: unpacking, reaping, recording
_STATUS_OF: dict[type[PtbError], int] = {
    SplitAccessError: 403,
    BudgetExhausted: 429,
    CandidateError: 400,
    RequestRefused: 400,
    ServiceClosed: 409,
}


class EvalRequest(BaseModel):
    """``POST /eval``: score *commit* of the agent's repository on *split*."""

    model_config = ConfigDict(extra="forbid")

    commit: str = Field(max_length=200)
    split: str = Field(max_length=200)
    limit: int | None = Field(default=None, ge=1, description="score only this many samples")


class SubmitRequest(BaseModel):
    """``POST /submit``: the agent's final commit (reward mode ``submit``)."""

    model_config = ConfigDict(extra="forbid")

    commit: str = Field(max_length=200)


def prepare_state_dir(state_dir: Path) -> Path:
    """Create the state directory as 0700 (only the service's user may enter it)."""
    state_dir = Path(state_dir)
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)  # a directory, not a secret: tightening an existing one is safe
    return state_dir


def ensure_admin_token(path: Path) -> str:
    """Create the admin token with mode 0600 at creation (``O_EXCL``, never chmod), or reuse it."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ServiceStateError(
                f"admin token {path} has mode {mode:o}: others could read it"
            ) from None
        return path.read_text(encoding="utf-8").strip()
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


class EvaluationService:
    """Budgeted, tiered evaluations of the agent's commits (Mode A or B scoring)."""

    def __init__(
        self,
        state_dir: Path,
        config: AgentTaskConfig,
        agent_repo: Path,
        token_path: Path | None = None,
        work_dir: Path | None = None,
    ):
        self.config = config
        self.agent_repo = Path(agent_repo)
        self.paths = StatePaths(prepare_state_dir(state_dir))
        self.token = ensure_admin_token(token_path or self.paths.token)
        copy_evaluable(
            config, self.paths.dataset, config.evaluable_splits()
        )  # never the hidden ones
        self.data: dict[str, list[Sample]] = {
            s: load_samples(config, self.paths.dataset, s) for s in config.evaluable_splits()
        }
        CandidateRepo(self.paths.repo).ensure()
        self.registry = open_registry(self.paths)
        self.ledger = Ledger(self.paths.ledger, config.splits)
        self.containment = Containment(
            IdentityPool(self.paths.identities), prepare_runs_root(work_dir)
        )
        if isinstance(config.scoring, ScoringModeB):
            from posttrainbench.service.mode_b.proxy_agent import (
                check_agent_host,  # imports Harbor: Mode B only
            )

            check_agent_host(config.scoring, config.limits, self.containment.pool)
        self.gate = EvalGate()
        self._slots = threading.BoundedSemaphore(config.concurrency)

    # -- reads --------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Tier, size, budget and what is left of every listed split (hidden ones: tier only)."""
        usage = self.ledger.usage()
        splits: dict[str, Any] = {}
        for name, policy in self.config.splits.items():
            if policy.tier == Tier.HIDDEN:
                splits[name] = {"tier": policy.tier.value}
                continue
            splits[name] = {
                "tier": policy.tier.value,
                "size": len(self.data[name]),
                "max_runs": policy.max_runs,
                "max_samples": policy.max_samples,
                **usage[name].model_dump(),
            }
            if policy.tier == Tier.AGGREGATE:
                splits[name]["min_samples"] = policy.min_samples
        return {
            "task": self.config.name,
            "reward_mode": self.config.reward.mode.value,
            "selection_split": self.config.reward.selection_split,
            "finalized": self.registry.snapshot().finalized_at is not None,
            "splits": splits,
        }

    # -- evaluations ----------------------------------------------------------------------

    def _open(self) -> None:
        if self.registry.snapshot().finalized_at is not None:
            raise ServiceClosed("the service is finalized: no more evaluations or submissions")

    def _pick(self, split: str, limit: int | None) -> list[Sample]:
        policy = self.config.splits.get(split)
        if policy is None or policy.tier == Tier.HIDDEN:
            raise SplitAccessError(f"split {split!r} is hidden: the agent cannot evaluate it")
        samples = self.data[split]
        n = min(limit or len(samples), len(samples))
        if policy.tier == Tier.AGGREGATE:
            if n < policy.min_samples:
                raise RequestRefused(
                    f"split {split!r} is aggregate-only: an evaluation needs at least "
                    f"{policy.min_samples} samples (asked {n})"
                )
            # A random subset: nested first-n prefixes would let two evaluations reveal one label.
            return samples if n == len(samples) else random.SystemRandom().sample(samples, n)
        return samples[:n]

    def evaluate(self, request: EvalRequest) -> dict[str, Any]:
        """Check tier, fetch the commit, charge the budget, then score a clean copy."""
        with self.gate.in_flight():
            return self._evaluate(request)

    def _evaluate(self, request: EvalRequest) -> dict[str, Any]:
        self._open()
        samples = self._pick(request.split, request.limit)
        candidate = self.registry.register(self.agent_repo, request.commit)
        self.ledger.charge(request.split, samples=len(samples), candidate=candidate.label)
        aggregate = self.config.tier(request.split) == Tier.AGGREGATE
        with self._slots, self.gate.alone() if aggregate else self.gate.side_by_side():
            report = score_candidate(
                self.config,
                self.registry.repo.source(candidate.sha),
                samples,
                self.containment,
                dataset_dir=self.paths.dataset,
                label=candidate.label,
                split=request.split,
                nested_jobs=nested_root(self.paths.root) / "eval",
            )
        self.registry.record_evaluation(
            candidate, request.split, report.n, report.mean, report.status
        )
        budget = self.ledger.usage()[request.split].model_dump()
        head = {"candidate": candidate.label, "commit": candidate.sha, "split": request.split}
        if self.config.tier(request.split) == Tier.AGGREGATE:
            # Only the mean and the count: no ids, answers, per-sample data or candidate output.
            return {
                **head,
                "tier": "aggregate",
                "n": report.n,
                "mean": report.mean,
                "status": report.status,
                "budget": budget,
            }
        return {
            **head,
            "tier": "viewable",
            "n": report.n,
            "correct": report.correct,
            "mean": report.mean,
            "status": report.status,
            "reason": getattr(report, "reason", None),
            "exit_code": report.exit_code,
            "duration_s": report.duration_s,
            "samples": [s.model_dump() for s in report.samples],
            "stderr_tail": report.stderr_tail,
            "budget": budget,
        }

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        """Record the final submission (reward mode ``submit`` only)."""
        with self.gate.in_flight():
            return self._submit(request)

    def _submit(self, request: SubmitRequest) -> dict[str, Any]:
        self._open()
        if self.config.reward.mode != RewardMode.SUBMIT:
            raise ServiceClosed(
                "this task's reward mode is auto_best: the best evaluated candidate is chosen, "
                "there is nothing to submit"
            )
        candidate = self.registry.register(self.agent_repo, request.commit)
        submission = self.registry.submit(candidate)
        return {"candidate": candidate.label, "commit": submission.sha, "time": submission.time}

    def finalize(self, authorization: str | None) -> ServiceSummary:
        """Close the service and return its record; needs ``Bearer <admin token>``."""
        self.check_admin(authorization)
        self.registry.finalize()
        # Requests past their open check still finish; the record includes them.
        self.gate.drain(self.config.timeouts.per_eval_s + DRAIN_GRACE_S)
        return summarize(self.config, self.registry.snapshot(), self.ledger)

    def check_admin(self, authorization: str | None) -> None:
        """Raise 401/403 unless *authorization* carries the admin token."""
        if not authorization or not authorization.startswith("Bearer "):
            raise HTTPException(401, "finalize needs 'Authorization: Bearer <admin token>'")
        if not hmac.compare_digest(
            authorization.removeprefix("Bearer ").strip().encode(), self.token.encode()
        ):
            raise HTTPException(403, "wrong admin token")


def create_app(
    state_dir: Path,
    config: AgentTaskConfig,
    *,
    agent_repo: Path,
    token_path: Path | None = None,
    work_dir: Path | None = None,
) -> FastAPI:
    """The service's FastAPI app over *state_dir*; the agent's commits are fetched from *agent_repo*."""
    service = EvaluationService(state_dir, config, agent_repo, token_path, work_dir)
    app = FastAPI(title=f"ptb evaluation service: {config.name}")
    app.state.service = service

    @app.exception_handler(PtbError)
    def _refused(_request: Any, exc: PtbError) -> JSONResponse:
        return JSONResponse(status_code=_status_of(exc), content={"detail": str(exc)})

    @app.get("/status")
    def status() -> dict[str, Any]:
        return service.status()

    @app.post("/eval")
    def evaluate(request: EvalRequest) -> dict[str, Any]:
        return service.evaluate(request)

    @app.post("/submit")
    def submit(request: SubmitRequest) -> dict[str, Any]:
        return service.submit(request)

    @app.post("/finalize")
    def finalize(authorization: str | None = Header(default=None)) -> dict[str, Any]:
        return service.finalize(authorization).model_dump(mode="json")

    return app


def _status_of(exc: PtbError) -> int:
    for kind, code in _STATUS_OF.items():
        if isinstance(exc, kind):
            return code
    return 500
