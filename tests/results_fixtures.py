"""Harbor trial directories for results tests and `bench/collect`, built with Harbor's own
models (`TrialResult`), so they have exactly the shape Harbor writes."""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harbor.models.agent.context import AgentContext
from harbor.models.task.id import LocalTaskId
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from harbor.models.trial.result import AgentInfo, ExceptionInfo, ModelInfo, TimingInfo, TrialResult
from harbor.models.verifier.result import VerifierResult

from posttrainbench.core.verdict import JUDGE_IDS, Evidence, Judgement
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.store import ResultsStore
from posttrainbench.task.schemas import BaseScore, Metrics, TaskSpec

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


@dataclass
class TrialSpec:
    """What one synthetic trial looks like."""

    agent: str = "claude-code"
    agent_model: str | None = "anthropic/claude-opus-4-1"
    benchmark: str = "gsm8k"
    model: str = "qwen3-1.7b"
    score: float | None = 0.5
    base_score: float | None = 0.2
    started: datetime = T0
    agent_hours: float = 2.0
    hours: float = 10.0
    gpus: int = 1
    error: str | None = None  # an exception type: the trial errored
    verifier_error: str | None = None  # metrics.error (e.g. no final_model)
    flagged: tuple[str, ...] = ()  # judges that flag the run
    judged: bool = True  # write all five verdicts
    cost_usd: float | None = 3.5
    input_tokens: int | None = 120_000
    output_tokens: int | None = 8_000
    trace: bool = True
    snapshot: bool = True
    final_model: bool = False
    finished: bool = True
    trial_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def write_trial(job_dir: Path, spec: TrialSpec, name: str | None = None) -> Path:
    """Write one trial directory under *job_dir* and return it."""
    task_name = f"posttrainbench/{spec.benchmark}-{spec.model}"
    trial_name = name or f"{spec.benchmark}-{spec.model}__{spec.trial_id[:7]}"
    trial = job_dir / trial_name
    (trial / "agent").mkdir(parents=True, exist_ok=True)
    (trial / "verifier").mkdir(parents=True, exist_ok=True)
    task_spec = TaskSpec(
        benchmark=spec.benchmark,
        benchmark_name=spec.benchmark,
        model=spec.model,
        model_source=f"hf:org/{spec.model}",
        hours=spec.hours,
        gpus=spec.gpus,
    )
    task_spec.dump(trial / "verifier" / "task.json")
    agent_start = spec.started + timedelta(minutes=5)
    agent_end = agent_start + timedelta(hours=spec.agent_hours)
    finished = agent_end + timedelta(minutes=20)
    exception = None
    if spec.error:
        exception = ExceptionInfo(
            exception_type=spec.error,
            exception_message=f"{spec.error} happened\ndetails",
            exception_traceback="Traceback ...",
            occurred_at=agent_end,
        )
    verifier = None
    if spec.score is not None and not spec.error:
        verifier = VerifierResult(
            rewards={"reward": spec.score if not spec.verifier_error else 0.0}
        )
        base = (
            BaseScore(
                model_path="/opt/ptb/models/base",
                accuracy=spec.base_score,
                stderr=0.01,
                n=100,
                n_correct=int(spec.base_score * 100),
            )
            if spec.base_score is not None
            else None
        )
        Metrics(
            benchmark=spec.benchmark,
            model_path="/logs/artifacts/final_model",
            accuracy=0.0 if spec.verifier_error else spec.score,
            stderr=0.01,
            n=100,
            n_correct=int(spec.score * 100),
            error=spec.verifier_error,
            base_model=base,
        ).dump(trial / "verifier" / "metrics.json")
        (trial / "verifier" / "reward.json").write_text(json.dumps(verifier.rewards))
    context = AgentContext(
        n_input_tokens=spec.input_tokens,
        n_output_tokens=spec.output_tokens,
        n_cache_tokens=0 if spec.input_tokens is not None else None,
        cost_usd=spec.cost_usd,
    )
    provider, _, model_name = (spec.agent_model or "").rpartition("/")
    result = TrialResult(
        id=uuid.UUID(spec.trial_id),
        task_name=task_name,
        trial_name=trial_name,
        trial_uri=f"file://{trial}",
        task_id=LocalTaskId(path=Path(f"/nonexistent/tasks/{spec.benchmark}-{spec.model}")),
        task_checksum="0" * 64,
        config=TrialConfig(
            task=TaskConfig(path=Path(f"/nonexistent/tasks/{spec.benchmark}-{spec.model}")),
            trial_name=trial_name,
            agent=AgentConfig(name=spec.agent, model_name=spec.agent_model),
        ),
        agent_info=AgentInfo(
            name=spec.agent,
            version="1.0.0",
            model_info=ModelInfo(name=model_name, provider=provider or None)
            if spec.agent_model
            else None,
        ),
        agent_result=context,
        verifier_result=verifier,
        exception_info=exception,
        started_at=spec.started,
        finished_at=finished,
        agent_execution=TimingInfo(started_at=agent_start, finished_at=agent_end),
    )
    (trial / "config.json").write_text(result.config.model_dump_json(indent=2))
    (trial / "trial.log").write_text("trial log\n")
    if spec.finished:  # Harbor writes result.json when the trial ends
        (trial / "result.json").write_text(result.model_dump_json(indent=2))
    if spec.judged and verifier is not None:
        for judge in JUDGE_IDS:
            flag = judge in spec.flagged
            Judgement(
                judge=judge,
                flagged=flag,
                decided_by="detector",
                justification=f"{judge}: planted finding"
                if flag
                else "no detector flagged the run",
                evidence=[Evidence(detector=f"{judge}_check", flagged=flag, detail="planted")]
                if flag
                else [],
            ).write(trial / "verifier")
    if spec.trace:
        lines = [
            {"type": "system", "subtype": "init", "model": "claude-opus-4-1", "session_id": "s"},
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "text",
                            "text": f"I will fine-tune {spec.model} for {spec.benchmark}.",
                        },
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Bash",
                            "input": {"command": "python train.py --epochs 2"},
                        },
                    ],
                },
            },
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "epoch 2 loss 0.41 <done>",
                        }
                    ],
                },
            },
            {
                "type": "result",
                "subtype": "success",
                "total_cost_usd": spec.cost_usd or 0.0,
                "usage": {
                    "input_tokens": spec.input_tokens or 0,
                    "output_tokens": spec.output_tokens or 0,
                },
            },
        ]
        (trial / "agent" / "claude-code.txt").write_text(
            "\n".join(json.dumps(x) for x in lines) + "\n"
        )
    if spec.snapshot:
        snap = trial / "artifacts" / "code_snapshot"
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "train.py").write_text("# training script\nprint('train')\n")
    if spec.final_model:
        fm = trial / "artifacts" / "final_model"
        fm.mkdir(parents=True, exist_ok=True)
        (fm / "config.json").write_text("{}")
    return trial


def write_job(jobs_dir: Path, job_name: str, specs: list[TrialSpec]) -> Path:
    """A Harbor job directory with its own (job-level) result.json and the trials."""
    job = jobs_dir / job_name
    job.mkdir(parents=True, exist_ok=True)
    (job / "config.json").write_text(json.dumps({"job_name": job_name}))
    (job / "result.json").write_text(
        json.dumps(
            {
                "id": str(uuid.uuid4()),
                "started_at": T0.isoformat(),
                "n_total_trials": len(specs),
                "stats": {},
            }
        )
    )
    for spec in specs:
        write_trial(job, spec)
    return job


def stored_file(results: Path, record: ResultRecord, name: str) -> bytes:
    """One file of a stored run, wherever the store keeps it (a blob or its run dir)."""
    store = ResultsStore(results)
    try:
        data, _ = store.read_run_file(record, name, 2**31)
    finally:
        store.close()
    return data


def sql(results: Path, statement: str, *args: object) -> list[tuple]:
    """Run one SQL statement on a store's database, committed (a test's own edit)."""
    conn = sqlite3.connect(results / "results.sqlite")
    try:
        with conn:
            return conn.execute(statement, args).fetchall()
    finally:
        conn.close()


def unpack_to_run_dir(results: Path, run_id: str) -> Path:
    """Turn a run stored as rows into a run directory (its files there, as a run stored
    with its final_model keeps them): returns the run dir."""
    store = ResultsStore(results)
    record = store.record(run_id)
    assert record is not None, run_id
    run_dir = store.runs / run_id
    run_dir.mkdir(parents=True)
    for name, data in sql(results, "SELECT name, data FROM files WHERE run_id = ?", run_id):
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_bytes(data)
    record.write(run_dir)
    store.close()
    sql(results, "DELETE FROM files WHERE run_id = ?", run_id)
    return run_dir


def forget_run(results: Path, run_id: str) -> None:
    """Remove a run from the store: as if it had never been exported."""
    for table in ("runs", "verdicts", "files"):
        sql(results, f"DELETE FROM {table} WHERE run_id = ?", run_id)
