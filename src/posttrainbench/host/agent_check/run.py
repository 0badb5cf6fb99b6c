"""Run one agent check: the scripted model, a real trial of the demo task, then each stage."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harbor.models.trial.result import TrialResult

from posttrainbench.core.errors import PtbError
from posttrainbench.host.agent_check import CHECKS_DIR, stages
from posttrainbench.host.agent_check.address import reachable_host_address, sandbox_allowance
from posttrainbench.host.agent_check.agents import CHECKABLE_AGENTS, CLI_WIRING
from posttrainbench.host.agent_check.report import CheckReport, StageResult
from posttrainbench.host.credentials.resolve import AuthMode
from posttrainbench.host.results.export import AGENT_CHECK_MARKER
from posttrainbench.host.runner.demo import DEMO_BENCHMARK, DEMO_MODEL
from posttrainbench.host.runner.job_runner import RunRequest, execute
from posttrainbench.host.scripted_model.script import Script, default_script
from posttrainbench.host.scripted_model.server import ScriptedModelServer
from posttrainbench.host.tasks.gpu_image import agent_cli_version
from posttrainbench.host.tasks.options import CompileOptions

REQUEST_LOG = "scripted-model-requests.jsonl"
CANARY_PREFIX = "sk-ptb-canary-"
CHECK_ENVS = ("local", "docker")


class AgentCheckError(PtbError):
    """The check cannot start: an agent it cannot check, or an environment it cannot use."""


def check_request(agent: str, env: str) -> None:
    """Refuse an agent or environment the check cannot use, before anything runs."""
    if agent not in CHECKABLE_AGENTS:
        raise AgentCheckError(
            f"cannot check agent {agent!r}; choose one of: {', '.join(CHECKABLE_AGENTS)}"
        )
    if env not in CHECK_ENVS:
        raise AgentCheckError(f"agent checks run on {' or '.join(CHECK_ENVS)}, not {env!r}")


def check_options(limit: int, hours: float) -> CompileOptions:
    """The small demo task the check runs: few questions, a short agent budget."""
    return CompileOptions(
        hours=hours,
        gpus=0,
        cpus=2,
        memory_gb=8,
        storage_gb=20,
        agent_eval_limit=limit,
        final_eval_limit=limit,
        verifier_timeout_min=30,
        # The default script submits the base model: its reward must equal this score.
        score_base_model=True,
    )


@contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    # The run resolves credentials and Harbor's agents read base URLs from the process
    # environment; only for the check's duration.
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _trial_result(trial_dir: Path) -> TrialResult | None:
    path = trial_dir / "result.json"
    try:
        return TrialResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _scripted_commands(script: Script) -> list[str]:
    return [turn.shell for turn in script.turns if turn.shell is not None]


async def run_check(
    agent: str,
    *,
    env: str = "local",
    script: Script | None = None,
    runs_dir: Path = CHECKS_DIR,
    limit: int = 5,
    hours: float = 0.5,
    reprompt_min_minutes: float | None = None,
    quiet: bool = True,
    extra_env: Callable[[str, str], dict[str, str]] | None = None,
) -> CheckReport:
    """Run ``agent``'s real CLI in a trial of the demo task against the scripted model
    (``hours``: the agent's time limit; ``reprompt_min_minutes``: wrap it in the
    re-prompting agent, as ``ptb run --reprompt-min-minutes`` does; ``extra_env``: more
    variables for the run, from the scripted model's base URL and key, e.g. to point the
    verifier's agentic judges at it)."""
    check_request(agent, env)
    wiring = CLI_WIRING[agent]
    script = script or default_script(agent)
    run_id = f"check-{agent}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir = runs_dir.resolve() / run_id
    canary = CANARY_PREFIX + secrets.token_hex(16)
    report = CheckReport(
        agent=agent, cli_version=agent_cli_version(agent), env=env, run_dir=str(run_dir)
    )
    run_dir.mkdir(parents=True, exist_ok=False)
    # A check is not an agent's run: the results export leaves this dir out.
    (run_dir / AGENT_CHECK_MARKER).write_text(f"ptb agents check {agent}\n", encoding="utf-8")
    server = ScriptedModelServer(
        script,
        host=reachable_host_address(),
        expected_key=canary,
        log_path=run_dir / REQUEST_LOG,
        model=wiring.model.split("/", 1)[-1],
    )
    request = RunRequest(
        benchmark=DEMO_BENCHMARK,
        model=DEMO_MODEL,
        agent=agent,
        agent_model=wiring.model,
        env=env,
        runs_dir=runs_dir,
        run_id=run_id,
        options=check_options(limit, hours),
        quiet=quiet,
        command="agents check",
        auth=AuthMode.API_KEY,
        reprompt_min_minutes=reprompt_min_minutes,
    )
    with (
        server,
        _environ(
            {
                wiring.key_var: canary,
                wiring.base_url_var: server.url + wiring.base_path,
                **sandbox_allowance(server.url),
                **(extra_env(server.url + wiring.base_path, canary) if extra_env else {}),
            }
        ),
    ):
        record = await execute(request)
    report.requests = len(server.requests)
    trial = record.trials[0] if record.trials else None
    result = _trial_result(Path(trial.trial_dir)) if trial else None
    if trial is None or result is None:
        report.stages = [StageResult(stage="install", ok=False, detail="Harbor ran no trial")]
    else:
        trial_dir = Path(trial.trial_dir)
        report.reward = trial.reward
        report.stages = [
            stages.install(result, report.cli_version),
            stages.auth(server),
            stages.agent_run(result, server),
            stages.trace(trial_dir, _scripted_commands(script)),
            stages.handoff(trial_dir),
            stages.reward(result, trial.reward),
            stages.judges(trial_dir, _scripted_commands(script)),
        ]
    report.stages.append(stages.scrubbed(run_dir, canary))
    report.dump(report.path)
    return report
