"""Re-score stored runs: compile the current task, run a replay trial, export it.

Each selected run gets one Harbor job, `rescore-<run id>-<task version>`, under
`RUNS_DIR/jobs`: a real trial of the current task (local sandbox or Docker) whose agent
only restores the stored final_model and code snapshot, so the current verifier and
judges score it in their own environment exactly as they score an agent's trial. The
finished trial is exported into the store as a new record linked to the original
(`rescore_of`); the original stays. Running the command again does nothing for a run
already re-scored at the current version, reuses a finished trial that was not yet
exported, and runs again only a trial that failed outside the model's control.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from harbor.job import Job
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from posttrainbench.core.errors import PtbError
from posttrainbench.host.credentials.scrub import Scrubber
from posttrainbench.host.rescore.plan import Candidate, NotRescorable, plan
from posttrainbench.host.rescore.replay_agent import IMPORT_PATH
from posttrainbench.host.results.export import export
from posttrainbench.host.results.harbor_trial import (
    RESULT_FILE,
    TrialReadError,
    read_outcome,
    trial_id,
)
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.rescore_origin import ORIGIN_KWARG, RescoreOrigin
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.host.runner.job_runner import RunRequest, job_config
from posttrainbench.host.runner.prebuild import prebuild_local_environment
from posttrainbench.host.runner.preflight import check_judge
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.host.tasks.task_version import TASK_VERSION_FILE, TaskVersion, changed_inputs
from posttrainbench.task.schemas import TaskSpec

RescoreEnv = Literal["local", "docker"]
RESCORE_ENVS: tuple[RescoreEnv, ...] = ("local", "docker")
ItemStatus = Literal["rescored", "already_current", "already_rescored", "failed"]
RETIRED_DIR = ".retired"


class RescoreRequest(BaseModel):
    """What `ptb rescore` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    store: Path
    runs_dir: Path = Path("ptb-rescore")
    env: RescoreEnv = "local"
    benchmarks: list[str] = Field(default_factory=list)
    run_ids: list[str] = Field(default_factory=list)
    quiet: bool = True


class RescoreItem(BaseModel):
    """One selected run: its old and (when re-scored) new score, with both versions."""

    model_config = ConfigDict(extra="forbid")

    id: str
    agent: str
    benchmark: str
    base_model: str
    status: ItemStatus
    old_version: str | None
    old_score: float | None
    new_version: str
    changed: list[str] = Field(
        default_factory=list,
        description="the input groups of the task that differ between the two versions",
    )
    new_score: float | None = None
    new_id: str | None = Field(default=None, description="the re-score's record id")
    detail: str | None = Field(default=None, description="why it failed, in one line")


class RescoreSummary(BaseModel):
    """What `ptb rescore` did (`--json`)."""

    model_config = ConfigDict(extra="forbid")

    store: str
    runs_dir: str
    items: list[RescoreItem] = Field(default_factory=list)
    not_rescorable: list[NotRescorable] = Field(default_factory=list)


def _options(spec: TaskSpec) -> CompileOptions:
    """The original task's settings (what decides a score and what shaped the run)."""
    return CompileOptions(
        hours=spec.hours,
        gpus=spec.gpus,
        feedback=spec.feedback,
        agent_eval_budget=spec.agent_eval_budget,
        agent_eval_limit=spec.agent_eval_limit,
        final_eval_limit=spec.final_eval_limit,
        score_base_model=spec.score_base_model,
        seed=spec.seed,
        variant=spec.variant,
    )


class _Tasks:
    """Each distinct task spec compiled once, under `RUNS_DIR/tasks/<n>/`."""

    def __init__(self, root: Path):
        self.root = root
        self._compiled: dict[str, tuple[RunRequest, Path, TaskVersion]] = {}

    def get(self, spec: TaskSpec, env: str) -> tuple[RunRequest, Path, TaskVersion]:
        key = spec.model_dump_json()
        if key not in self._compiled:
            options = _options(spec)
            out = self.root / str(len(self._compiled))
            task_dir = compile_task(spec.benchmark, spec.model, out, options)
            version = TaskVersion.model_validate_json(
                (task_dir / "tests" / TASK_VERSION_FILE).read_text(encoding="utf-8")
            )
            request = RunRequest(
                benchmark=spec.benchmark,
                model=spec.model,
                agent=IMPORT_PATH,
                env=env,
                options=options,
                quiet=True,
                command="rescore",
            )
            self._compiled[key] = (request, task_dir, version)
        return self._compiled[key]


def _finished_trial(job_dir: Path) -> tuple[Path | None, str | None]:
    """The job's trial when it finished in a way a re-run would not change, else None and,
    for a failed one, why."""
    # One attempt per job: its only trial directory.
    trial = next((p for p in sorted(job_dir.iterdir()) if (p / RESULT_FILE).is_file()), None)
    if trial is None:
        return None, None
    try:
        outcome = read_outcome(trial)
    except TrialReadError as exc:
        return None, str(exc)
    if outcome.kind in ("completed", "no_model"):
        return trial, None
    return None, f"{outcome.kind}: {outcome.reason}"


def _retire(job_dir: Path) -> None:
    """Keep a failed attempt for a look, out of the way of the next one."""
    retired = job_dir.parent / RETIRED_DIR
    retired.mkdir(exist_ok=True)
    n = sum(1 for p in retired.iterdir() if p.name.startswith(job_dir.name))
    os.replace(job_dir, retired / f"{job_dir.name}.{n + 1}")


def _run_job(
    request: RunRequest, task_dir: Path, jobs_dir: Path, job_name: str, candidate: Candidate
) -> None:
    config = job_config(request, task_dir, jobs_dir, job_name)
    config.agents[0].kwargs.update(
        final_model=str(candidate.final_model),
        snapshot=str(candidate.snapshot) if candidate.snapshot else None,
        **{ORIGIN_KWARG: RescoreOrigin.of(candidate.record).model_dump(mode="json")},
    )

    async def go() -> None:
        job = await Job.create(config)
        await job.run()

    asyncio.run(go())


def _rescored(records: list[ResultRecord], original: str, version: str) -> ResultRecord | None:
    return next(
        (r for r in records if r.rescore_of == original and r.task_version == version), None
    )


def _stored_record(store: ResultsStore, trial: Path) -> ResultRecord | None:
    """The record the export stored for *trial* (read alone, not the whole store)."""
    run_id = trial_id((trial / RESULT_FILE).read_text(encoding="utf-8"))
    return store.record(run_id) if run_id else None


class _Rescorer:
    """Runs and exports the re-score trial of one run after another."""

    def __init__(self, request: RescoreRequest, store: ResultsStore):
        self.request = request
        self.store = store
        runs_dir = request.runs_dir.resolve()
        self.jobs_dir = runs_dir / "jobs"
        self.tasks = _Tasks(runs_dir / "tasks")
        self.scrubber = Scrubber.for_run(os.environ)

    def trial(
        self, candidate: Candidate, request: RunRequest, task_dir: Path, job_name: str
    ) -> tuple[Path | None, str | None]:
        """The job's finished trial (run now unless an earlier attempt finished), or why not."""
        job_dir = self.jobs_dir / job_name
        if job_dir.is_dir():
            trial, _ = _finished_trial(job_dir)
            if trial is not None:  # interrupted after the trial, before its export
                return trial, None
            _retire(job_dir)
        try:
            if self.request.env == "local":
                prebuild_local_environment(task_dir, Console(stderr=True, quiet=self.request.quiet))
            _run_job(request, task_dir, self.jobs_dir, job_name, candidate)
        except (PtbError, OSError, ValueError, RuntimeError) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        finally:
            if job_dir.is_dir():  # the verifier had the judges' keys
                self.scrubber.scrub_tree(job_dir)
        trial, why = _finished_trial(job_dir)
        return trial, why or (None if trial else "the re-score trial did not finish")

    def rescore(self, item: RescoreItem, candidate: Candidate, records: list[ResultRecord]) -> None:
        """Fill in *item*: skipped when current or done before, else re-scored or failed."""
        request, task_dir, version = self.tasks.get(candidate.spec, self.request.env)
        item.new_version = version.version
        if candidate.record.task_version == version.version:
            return
        if candidate.record.task_inputs:  # what changed, where the old version recorded it
            item.changed = changed_inputs(candidate.record.task_inputs, version.inputs)
        done = _rescored(records, candidate.record.id, version.version)
        if done is None:
            job_name = f"rescore-{candidate.record.id}-{version.version}"
            trial, why = self.trial(candidate, request, task_dir, job_name)
            if trial is None:
                item.status, item.detail = "failed", why
                return
            export([self.jobs_dir / job_name], self.store.root, workers=1)
            done = _stored_record(self.store, trial)
            if done is None:
                item.status, item.detail = "failed", f"the re-score trial {trial} was not exported"
                return
        item.status = "rescored" if done.id not in {r.id for r in records} else "already_rescored"
        item.new_score, item.new_id = done.score, done.id


def rescore(
    request: RescoreRequest, say: Callable[[str], None] = lambda line: None
) -> RescoreSummary:
    """Re-score the selected runs of the store; see the module docstring."""
    store = ResultsStore.open(request.store, create=False)
    records, _ = store.load()
    candidates, refused = plan(
        records,
        store.runs,
        benchmarks=request.benchmarks or None,
        run_ids=request.run_ids or None,
    )
    if not candidates and not refused:
        raise PtbError("no agent run in the results store matches the selection")
    summary = RescoreSummary(
        store=str(store.root), runs_dir=str(request.runs_dir), not_rescorable=refused
    )
    for benchmark in sorted({c.spec.benchmark for c in candidates}):
        check_judge(benchmark)  # a judged benchmark's judge must be set before any trial
    rescorer = _Rescorer(request, store)
    for n, candidate in enumerate(candidates, start=1):
        original = candidate.record
        say(f"[{n}/{len(candidates)}] {original.id} ({original.agent_label}, {original.benchmark})")
        item = RescoreItem(
            id=original.id,
            agent=original.agent_label,
            benchmark=original.benchmark,
            base_model=original.base_model,
            status="already_current",
            old_version=original.task_version,
            old_score=original.score,
            new_version="",
        )
        summary.items.append(item)
        rescorer.rescore(item, candidate, records)
    return summary
