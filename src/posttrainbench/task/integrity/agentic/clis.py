"""How each judge CLI is started in the sandbox: PostTrainBench's command lines
(``run_judge.sh``), pointed at the configured endpoint through the sandbox's loopback."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.model_task_layout import MODEL_LAYOUT

# Where the pinned agent CLIs are: /opt/agent-clis, where envs.agent_clis binds them in the
# local sandbox and where a task's GPU image installs them.
CLI_DIRS_ENV = "PTB_AGENTIC_JUDGE_CLI_DIR"
CLI_ROOTS = (MODEL_LAYOUT.agent_clis,)
KEY_VAR = "PTB_JUDGE_KEY"


class CliCommand(BaseModel):
    """One CLI run: its command line, its environment (the key included) and the
    read-only directories it needs bound."""

    model_config = ConfigDict(extra="forbid")

    argv: list[str]
    env: dict[str, str]
    binds: list[str]


def cli_root(cli: str, env_dir: str | None = None) -> Path | None:
    """The installation holding ``node_modules/.bin/<cli>`` (or ``bin/<cli>``)."""
    roots = ([env_dir] if env_dir else []) + list(CLI_ROOTS)
    for root in roots:
        for sub in ("node_modules/.bin", "bin"):
            if (Path(root) / sub / cli).exists():
                return Path(root)
    return None


def _bin(root: Path, cli: str) -> str:
    for sub in ("node_modules/.bin", "bin"):
        if (root / sub / cli).exists():
            return str(root / sub)
    return str(root / "bin")


def base_env(root: Path, cli: str, python_bin: str, tiktoken_dir: str | None) -> dict[str, str]:
    """What every judge CLI starts with: nothing of the verifier's environment."""
    env = {
        # `python` is the verifier's Python (its venv: the tools' tiktoken).
        "PATH": f"{python_bin}:{_bin(root, cli)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp/home",
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "XDG_CONFIG_HOME": "/tmp/home/.config",
        "XDG_DATA_HOME": "/tmp/home/.local/share",
        "XDG_STATE_HOME": "/tmp/home/.local/state",
        "XDG_CACHE_HOME": "/tmp/home/.cache",
    }
    if tiktoken_dir:
        env["TIKTOKEN_CACHE_DIR"] = tiktoken_dir
    return env


def codex_command(
    model: str, prompt: str, base_url: str, api_key: str, env: dict[str, str]
) -> CliCommand:
    """run_judge.sh's ``codex --search -a never exec --json ... --yolo --model M PROMPT``,
    with an API key instead of its ChatGPT subscription login."""
    argv = [
        "codex",
        "--search",
        "-a",
        "never",
        "exec",
        "--json",
        "-c",
        "model_reasoning_summary=detailed",
        "-c",
        "model_reasoning_effort=xhigh",
        "-c",
        f"openai_base_url={json.dumps(base_url)}",
        "--skip-git-repo-check",
        "--yolo",
        "--model",
        model,
        prompt,
    ]
    return CliCommand(
        argv=argv,
        env={**env, "CODEX_HOME": "/tmp/codex-home", "CODEX_API_KEY": api_key},
        binds=[],
    )


def opencode_command(
    model: str, prompt: str, base_url: str, api_key: str, env: dict[str, str]
) -> CliCommand:
    """run_judge.sh's ``opencode run --model M --format json PROMPT`` with its
    opencode.json (every permission allowed), the provider pointed at the endpoint."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    config = {
        "$schema": "https://opencode.ai/config.json",
        "permission": "allow",
        "provider": {provider: {"options": {"apiKey": f"{{env:{KEY_VAR}}}", "baseURL": base_url}}},
    }
    return CliCommand(
        argv=["opencode", "run", "--model", model, "--format", "json", prompt],
        env={**env, "OPENCODE_CONFIG_CONTENT": json.dumps(config), KEY_VAR: api_key},
        binds=[],
    )


def python_binds(prefix: str, base_prefix: str, lib: str | None) -> list[str]:
    """The Python the tools run on (its venv and its base installation)."""
    binds = [prefix]
    if os.path.realpath(base_prefix) != os.path.realpath(prefix):
        binds.append(base_prefix)
    if lib:
        binds.append(lib)
    return binds
