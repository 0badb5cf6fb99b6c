"""Each stage of an agent check, judged from what the trial left behind."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from harbor.models.trial.result import TimingInfo, TrialResult
from pydantic import ValidationError

from posttrainbench.core.safe_fs import SafeDir
from posttrainbench.core.verdict import VERDICT_IDS, Judgement
from posttrainbench.host.agent_check.report import StageResult
from posttrainbench.host.scripted_model.server import ScriptedModelServer
from posttrainbench.task.integrity.traces.load import (
    TraceInputError,
    parse_trace,
    parse_trial_trace,
)
from posttrainbench.task.integrity.traces.trial_files import find_trial_traces

MAX_SCAN_BYTES = 512 * 2**20


def seconds(*timings: TimingInfo | None) -> float | None:
    """The summed duration of Harbor's timing records (None when none finished)."""
    total = 0.0
    seen = False
    for timing in timings:
        if timing and timing.started_at and timing.finished_at:
            total += (timing.finished_at - timing.started_at).total_seconds()
            seen = True
    return round(total, 1) if seen else None


def _exception(result: TrialResult) -> str | None:
    info = result.exception_info
    return (
        f"{info.exception_type}: {info.exception_message.strip().splitlines()[0]}" if info else None
    )


def install(result: TrialResult, pinned: str | None) -> StageResult:
    """The CLI was in the environment at the pinned version (Harbor skipped its download)."""
    took = seconds(result.environment_setup, result.agent_setup)
    version = result.agent_info.version
    ran = result.agent_execution is not None and result.agent_execution.started_at is not None
    if not ran:  # setup failed: Harbor's own install ran (and cannot download offline)
        return StageResult(
            stage="install",
            ok=False,
            seconds=took,
            detail=_exception(result) or "the agent never started",
        )
    if pinned is not None and version != pinned:
        return StageResult(
            stage="install",
            ok=False,
            seconds=took,
            detail=f"found version {version}, pinned {pinned}",
        )
    return StageResult(stage="install", ok=True, seconds=took, detail=f"version {version} present")


def auth(server: ScriptedModelServer) -> StageResult:
    """Every model request carried the key the agent was given."""
    posts = [r for r in server.requests if r.method == "POST" and r.api != "other"]
    if not posts:
        return StageResult(stage="auth", ok=False, detail="no request reached the scripted model")
    without = [r for r in posts if r.key_ok is False]
    if without:
        return StageResult(
            stage="auth",
            ok=False,
            detail=f"{len(without)} of {len(posts)} requests lacked the agent's API key",
        )
    return StageResult(
        stage="auth", ok=True, detail=f"{len(posts)} requests ({posts[0].api}), all with the key"
    )


def agent_run(result: TrialResult, server: ScriptedModelServer) -> StageResult:
    """The CLI went through every turn of the script and exited cleanly."""
    took = seconds(result.agent_execution)
    used, total = server.conversation.turns_used, len(server.conversation.script.turns)
    failed = [r.error for r in server.requests if r.error]
    if (
        result.exception_info is not None
        and result.exception_info.exception_type != "AgentTimeoutError"
    ):
        return StageResult(
            stage="agent run", ok=False, seconds=took, detail=_exception(result) or ""
        )
    if failed:
        return StageResult(
            stage="agent run",
            ok=False,
            seconds=took,
            detail=f"the scripted model refused a request: {failed[0]}",
        )
    if used < total:
        return StageResult(
            stage="agent run",
            ok=False,
            seconds=took,
            detail=f"the CLI stopped after {used} of {total} script turns",
        )
    return StageResult(
        stage="agent run", ok=True, seconds=took, detail=f"{used}/{total} script turns"
    )


def trace(trial_dir: Path, commands: list[str]) -> StageResult:
    """The CLI's own trace parses and holds every command the script had it run."""
    started = datetime.now()
    try:
        parsed, _ = parse_trial_trace(trial_dir)
    except TraceInputError as exc:
        return StageResult(stage="trace parsed", ok=False, detail=str(exc))
    seen = parsed.shell_commands()
    missing = [c for c in commands if not any(c in s for s in seen)]
    took = round((datetime.now() - started).total_seconds(), 1)
    if missing:
        return StageResult(
            stage="trace parsed",
            ok=False,
            seconds=took,
            detail=f"{parsed.format} trace lacks {len(missing)} of {len(commands)} scripted commands, e.g. {missing[0]!r}",
        )
    calls = len(parsed.of_kind("tool_call")) or len(seen)
    return StageResult(
        stage="trace parsed",
        ok=True,
        seconds=took,
        detail=f"{parsed.format}: {calls} tool calls, {len(commands)}/{len(commands)} scripted commands",
    )


def _verifier_json(trial_dir: Path, name: str) -> dict | None:
    try:
        with SafeDir.open(trial_dir) as root:
            if root.lstat(f"verifier/{name}") is None:
                return None
            data = json.loads(root.read_bytes(f"verifier/{name}", 64 * 2**20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def handoff(trial_dir: Path) -> StageResult:
    """The verifier found and loaded the final_model the agent wrote."""
    metrics = _verifier_json(trial_dir, "metrics.json")
    if metrics is None:
        return StageResult(
            stage="final_model handed off", ok=False, detail="the verifier wrote no metrics.json"
        )
    if metrics.get("error"):
        return StageResult(
            stage="final_model handed off", ok=False, detail=str(metrics["error"]).splitlines()[0]
        )
    return StageResult(
        stage="final_model handed off", ok=True, detail=f"scored {metrics.get('n')} questions"
    )


def reward(result: TrialResult, value: float | None) -> StageResult:
    """The verifier wrote a reward."""
    took = seconds(result.verifier)
    if value is None:
        return StageResult(stage="verifier reward", ok=False, seconds=took, detail="no reward")
    return StageResult(stage="verifier reward", ok=True, seconds=took, detail=f"reward {value:.4f}")


def _judged_commands(trial_dir: Path) -> list[str]:
    # The judges read every trace the finder returns from the agent's logs (their copy in
    # /logs/artifacts/agent_logs is the trial's agent/ directory, collected).
    commands: list[str] = []
    for path in find_trial_traces(trial_dir):
        try:
            commands += parse_trace(path).shell_commands()
        except TraceInputError:
            continue
    return commands


def judges(trial_dir: Path, commands: list[str]) -> StageResult:
    """Every judge decided, none flagged the honest script, and the traces they read hold
    every command the script ran."""
    verdicts: list[Judgement] = []
    verifier = trial_dir / "verifier"
    ours = {Judgement.filename(j) for j in VERDICT_IDS}  # not PostTrainBench's judges' files
    for path in sorted(verifier.glob("judgement_*.json")) if verifier.is_dir() else []:
        if path.name not in ours:
            continue
        data = _verifier_json(trial_dir, path.name)
        try:
            verdicts.append(Judgement.model_validate(data))
        except ValidationError:
            return StageResult(stage="judges", ok=False, detail=f"unreadable judgement {path.name}")
    if not verdicts:
        return StageResult(
            stage="judges", ok=False, detail="no judgement written (see verifier/judges.log)"
        )
    flagged = [v.judge for v in verdicts if v.flagged]
    undecided = [v.judge for v in verdicts if v.flagged is None]
    if flagged or undecided:
        parts = ([f"flagged: {', '.join(flagged)}"] if flagged else []) + (
            [f"undecided: {', '.join(undecided)}"] if undecided else []
        )
        return StageResult(stage="judges", ok=False, detail="; ".join(parts))
    seen = _judged_commands(trial_dir)
    unseen = [c for c in commands if not any(c in s for s in seen)]
    if unseen:
        return StageResult(
            stage="judges",
            ok=False,
            detail=f"the traces the judges read lack {len(unseen)} of {len(commands)} scripted commands",
        )
    return StageResult(
        stage="judges",
        ok=True,
        detail=f"{len(verdicts)} judges, none flagged; their traces hold {len(commands)}/{len(commands)} scripted commands",
    )


def scrubbed(run_dir: Path, canary: str) -> StageResult:
    """The API key given to the agent appears in no file of the run."""
    started = datetime.now()
    needle = canary.encode()
    hits: list[str] = []
    for path in sorted(run_dir.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            with path.open("rb") as handle:
                if needle in handle.read(MAX_SCAN_BYTES):
                    hits.append(str(path.relative_to(run_dir)))
        except OSError:
            continue
    took = round((datetime.now() - started).total_seconds(), 1)
    if hits:
        return StageResult(
            stage="secrets scrubbed",
            ok=False,
            seconds=took,
            detail=f"the API key is in {len(hits)} file(s), e.g. {hits[0]}",
        )
    return StageResult(
        stage="secrets scrubbed",
        ok=True,
        seconds=took,
        detail="the API key is in no file of the run",
    )
