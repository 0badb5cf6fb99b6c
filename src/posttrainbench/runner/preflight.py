"""Checks that fail fast, with one clear line, before any slow step."""

from __future__ import annotations

import os
from pathlib import Path
from shutil import which

from posttrainbench.credentials.resolve import (
    AuthMode,
    ResolvedCredentials,
    forbidden_roots,
    resolve_credentials,
    spec_for,
)
from posttrainbench.errors import RunError


def check_local_sandbox() -> None:
    """The local sandbox needs bubblewrap."""
    if which("bwrap") is None:
        raise RunError(
            "bubblewrap (bwrap) is not installed; run `make demo` or `apt-get install bubblewrap`"
        )


def check_judge(benchmark_id: str) -> None:
    """A judged benchmark's judge model and key must be set before a run starts."""
    from posttrainbench.benchmarks import get_benchmark
    from posttrainbench.benchmarks.llm_judge import JudgeConfigError

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


def check_cloud_login(env: str) -> None:
    """Modal and Daytona need the provider's login before anything is compiled or built
    (without it every trial would error at sandbox creation)."""
    from posttrainbench.runner.environments import CLOUD_ENVS

    if env not in CLOUD_ENVS:
        return
    from harbor.environments.factory import EnvironmentFactory

    try:
        cls = EnvironmentFactory.get_environment_class(import_path=CLOUD_ENVS[env])
    except ImportError as exc:
        raise RunError(
            f"--env {env} needs the {env} SDK ({exc}); install posttrainbench with the {env} extra"
        ) from None
    try:
        cls.preflight({})
    except (SystemExit, Exception) as exc:  # Harbor's preflight exits with its message
        message = " ".join(str(exc.code if isinstance(exc, SystemExit) else exc).split())
        raise RunError(f"--env {env}: {message}") from None
