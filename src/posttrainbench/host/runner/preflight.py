"""Checks that fail fast, with one clear line, before any slow step."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from shutil import which

from posttrainbench.core.errors import RunError
from posttrainbench.host.credentials.resolve import (
    AuthMode,
    ResolvedCredentials,
    forbidden_roots,
    resolve_credentials,
    spec_for,
)

# The agents PostTrainBench has credentials and images for: what an unknown name's error lists.
COMMON_AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "oracle", "nop")


def check_ids(benchmark_id: str, model_id: str) -> None:
    """The benchmark and base model are in the catalog (UnknownBenchmarkError/UnknownModelError)."""
    from posttrainbench.host.catalog import get_benchmark, get_model

    get_benchmark(benchmark_id)
    get_model(model_id)


def check_agent(agent: str) -> None:
    """The agent is a Harbor agent name or an importable `module:Class`; otherwise one line
    with the closest known name, checked before any task is compiled or environment built
    (Harbor itself would only refuse it when the job starts, after the build)."""
    from harbor.agents.factory import AgentFactory
    from harbor.agents.installed.acp_registry import is_acp_registry_shorthand
    from harbor.models.agent.name import AgentName

    if is_acp_registry_shorthand(agent):
        return
    if ":" in agent:
        from harbor.models.trial.config import AgentConfig

        try:
            AgentFactory.get_agent_class_from_config(AgentConfig(import_path=agent))
        except Exception as exc:  # ImportError, AttributeError, ValueError from Harbor's import
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise RunError(f"cannot load agent {agent!r}: {reason}") from None
        return
    known = sorted(AgentName.values())
    if agent in known:
        return
    close = difflib.get_close_matches(agent, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise RunError(
        f"unknown agent {agent!r}; {hint}known agents include {', '.join(COMMON_AGENTS)} "
        f"(of Harbor's {len(known)}), or give a module:Class"
    )


def check_local_sandbox() -> None:
    """The local sandbox needs bubblewrap."""
    if which("bwrap") is None:
        raise RunError(
            "bubblewrap (bwrap) is not installed; run `make demo` or `apt-get install bubblewrap`"
        )


def check_agent_cli_tools(agent: str) -> None:
    """An agent CLI on the local sandbox is installed with this machine's Node.js and npm."""
    from posttrainbench.host.agents.clis import is_agent_cli

    if is_agent_cli(agent) and (which("node") is None or which("npm") is None):
        raise RunError(
            f"{agent} on the local sandbox is installed with this machine's Node.js and npm, "
            "which are missing; `apt-get install nodejs npm`"
        )


def check_judge(benchmark_id: str) -> None:
    """A judged benchmark's judge model and key must be set before a run starts."""
    from posttrainbench.task.benchmarks import get_benchmark
    from posttrainbench.task.benchmarks.llm_judge import JudgeConfigError

    bench = get_benchmark(benchmark_id)
    if not bench.uses_llm_judge:
        return
    try:
        bench.judge()
    except JudgeConfigError as exc:
        raise RunError(f"{benchmark_id} is scored by an LLM judge: {exc}") from None


def check_credentials(
    agent: str,
    agent_model: str | None,
    *,
    runs_dir: Path,
    profile: str | None = None,
    auth: AuthMode = AuthMode.AUTO,
    secrets_dir: Path | None = None,
) -> ResolvedCredentials:
    """Resolve the agent's credentials, or raise CredentialError naming what is missing.

    Runs first in `ptb run`, so a missing key stops the run before anything is compiled,
    built or billed.
    """
    spec = spec_for(agent, agent_model, profile)
    return resolve_credentials(
        spec, os.environ, mode=auth, secrets_dir=secrets_dir, forbidden=forbidden_roots(runs_dir)
    )


def check_cloud_login(env: str, label: str | None = None) -> None:
    """Modal and Daytona need the provider's login before anything is compiled or built
    (without it every trial would error at sandbox creation). *label* starts the error
    line (default ``--env <env>``)."""
    from posttrainbench.host.runner.environments import CLOUD_ENVS

    if env not in CLOUD_ENVS:
        return
    label = label or f"--env {env}"
    from harbor.environments.factory import EnvironmentFactory

    try:
        cls = EnvironmentFactory.get_environment_class(import_path=CLOUD_ENVS[env])
    except ImportError as exc:
        raise RunError(
            f"{label} needs the {env} SDK ({exc}); install posttrainbench with the {env} extra"
        ) from None
    try:
        cls.preflight({})
    except (SystemExit, Exception) as exc:  # Harbor's preflight exits with its message
        message = " ".join(str(exc.code if isinstance(exc, SystemExit) else exc).split())
        raise RunError(f"{label}: {message}") from None
