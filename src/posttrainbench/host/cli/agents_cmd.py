"""`ptb agents check`: run a real agent CLI end to end against a scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from posttrainbench.host.agent_check import CHECKS_DIR
from posttrainbench.host.cli.options import Json, runs_dir_option

app = typer.Typer(no_args_is_help=True, help="Check the agent CLIs before spending money on them.")


@app.command("check")
def check(
    agent: str = typer.Option(
        ...,
        "-a",
        "--agent",
        metavar="AGENT",
        help="The agent CLI: claude-code, codex, gemini-cli or opencode.",
    ),
    env: str = typer.Option(
        "local", "-e", "--env", help="Where the trial runs: local (sandbox) or docker."
    ),
    script: Path | None = typer.Option(
        None,
        "--script",
        metavar="FILE",
        help="A YAML script of the model's turns (default: the shipped honest-agent script).",
    ),
    limit: int = typer.Option(
        5, "--limit", min=1, metavar="N", help="Questions the verifier scores."
    ),
    runs_dir: Path = runs_dir_option(
        CHECKS_DIR, "Where the check's run is written (not the runs dir: checks are not runs)."
    ),
    as_json: bool = Json,
) -> None:
    """Run the real agent CLI in a real trial of the demo task against a scripted model.

    The scripted model speaks the CLI's own API (streaming and tool calls) on this
    machine and answers from a script, so nothing is billed. One row per stage: install,
    auth, agent run, trace parsed, final_model handed off, verifier reward, judges,
    secrets scrubbed. Exits 1 when a stage fails.

    Example: ptb agents check -a claude-code
    """
    from posttrainbench.host.agent_check.run import check_request, run_check
    from posttrainbench.host.runner.preflight import check_agent_cli_tools, check_local_sandbox
    from posttrainbench.host.scripted_model.script import load_script

    check_request(agent, env)
    parsed = load_script(script) if script is not None else None
    if env == "local":
        check_local_sandbox()
        check_agent_cli_tools(agent)
    err = Console(stderr=True)
    err.print(
        f"ptb agents check: {escape(agent)} on {escape(env)} against the scripted model",
        highlight=False,
    )
    # Harbor's job progress goes to stderr: stdout is the result (--json parses it).
    with contextlib.redirect_stdout(sys.stderr):
        report = asyncio.run(
            run_check(agent, env=env, script=parsed, runs_dir=runs_dir, limit=limit)
        )
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        table = Table(title=f"{agent} {report.cli_version or ''} on {env}")
        for column in ("stage", "result", "time", "detail"):
            table.add_column(column)
        for stage in report.stages:
            table.add_row(
                stage.stage,
                "pass" if stage.ok else "[red]FAIL[/]",
                "-" if stage.seconds is None else f"{stage.seconds:.1f} s",
                escape(stage.detail),
            )
        Console(width=max(Console().width, 120)).print(table)
        typer.echo(f"run: {report.run_dir}")
    failure = report.first_failure
    if failure is not None:
        err.print(
            f"FAILED at {failure.stage}: {escape(failure.detail)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1)
