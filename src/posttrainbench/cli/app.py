"""Root of the `ptb` command line; turns user errors into one line and exit code 2."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from posttrainbench.cli import (
    agent_task_cmd,
    cache_cmd,
    contamination_cmd,
    data_cmd,
    demo_cmd,
    eval_cmd,
    judge_cmd,
    list_cmd,
    report_cmd,
    results_cmd,
    run_cmd,
    sweep_cmd,
    tasks_cmd,
    traces_cmd,
)
from posttrainbench.errors import PtbError

app = typer.Typer(
    name="ptb",
    help="PostTrainBench: measure how well AI agents post-train base LLMs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(list_cmd.app, name="list")
app.add_typer(tasks_cmd.app, name="tasks")
app.add_typer(data_cmd.app, name="data")
app.add_typer(traces_cmd.app, name="traces")
app.add_typer(contamination_cmd.app, name="contamination")
app.add_typer(results_cmd.app, name="results")
app.add_typer(sweep_cmd.app, name="sweep")
app.add_typer(cache_cmd.app, name="cache")
app.add_typer(agent_task_cmd.app, name="agent-task")
app.command("eval")(eval_cmd.eval_model)
app.command("baseline")(eval_cmd.baseline)
app.command("run")(run_cmd.run)
app.command("demo")(demo_cmd.demo)
app.command("judge")(judge_cmd.judge)
app.command("report")(report_cmd.report)


def main() -> None:
    """Console entry point."""
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of exiting.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except PtbError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted; everything written so far is kept")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:
        # Usage errors (unknown command, missing option) come from Typer's vendored
        # click; recognise them by shape rather than by a private import path.
        if hasattr(exc, "format_message") and getattr(exc, "exit_code", None) == 2:
            Console(stderr=True).print(
                f"[bold red]error:[/] {exc.format_message()}", highlight=False
            )
            sys.exit(2)
        raise
