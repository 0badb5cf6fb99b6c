"""`ptb agent-task build`: compile an agent-task config into a Harbor task directory."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from posttrainbench.host.cli.options import out_option

app = typer.Typer(
    help="Agent-optimization tasks (budgeted evaluation service, hidden splits).",
    no_args_is_help=True,
)


@app.command("build")
def build(
    config: Path = typer.Argument(..., metavar="CONFIG", help="Agent-task YAML config."),
    out: Path = out_option(..., "Directory to write the task directory <name>/ into."),
    port: int = typer.Option(
        8765, "--port", metavar="PORT", help="The evaluation service's port on 127.0.0.1."
    ),
    agent_user: str = typer.Option(
        "agent", "--agent-user", metavar="USER", help="Unprivileged user the agent runs as."
    ),
    agent_timeout_sec: int = typer.Option(
        3600, "--agent-timeout-sec", metavar="SECONDS", help="The agent's time limit."
    ),
    no_network: bool = typer.Option(
        False,
        "--no-network",
        help="No network for the agent (a private loopback in the local sandbox).",
    ),
    base_image: str | None = typer.Option(
        None, "--base-image", metavar="IMAGE", help="Default base image of the Dockerfile."
    ),
) -> None:
    """Write the Harbor task for CONFIG into OUT/<name> (replacing an older one atomically).

    Example: ptb agent-task build examples/agent-task-gsm8k/task.yaml -o tasks/
    """
    from pydantic import ValidationError

    from posttrainbench.core.errors import PtbError
    from posttrainbench.host.agent_tasks.compiler import (
        DEFAULT_BASE_IMAGE,
        BuildOptions,
        build_agent_task,
    )

    try:
        options = BuildOptions(
            port=port,
            agent_user=agent_user,
            agent_timeout_sec=agent_timeout_sec,
            network_mode="no-network" if no_network else "public",
            base_image=base_image or DEFAULT_BASE_IMAGE,
        )
    except ValidationError as exc:
        raise PtbError(
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from None
    path = build_agent_task(config, out, options)
    Console().print(f"wrote {path}")
