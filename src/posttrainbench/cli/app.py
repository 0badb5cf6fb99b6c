"""Root of the `ptb` command line; turns user errors into one line and exit code 2."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.cli import (
    agent_task_cmd,
    agents_cmd,
    cache_cmd,
    contamination_cmd,
    data_cmd,
    demo_cmd,
    eval_cmd,
    judge_cmd,
    list_cmd,
    report_cmd,
    rescore_cmd,
    results_cmd,
    run_cmd,
    sweep_cmd,
    tasks_cmd,
    traces_cmd,
)
from posttrainbench.cli.help_format import PtbGroup
from posttrainbench.cli.options import renamed_hint
from posttrainbench.errors import PtbError

app = typer.Typer(
    name="ptb",
    cls=PtbGroup,
    help="PostTrainBench: measure how well AI agents post-train base LLMs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        import posttrainbench

        typer.echo(f"ptb {posttrainbench.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """PostTrainBench: measure how well AI agents post-train base LLMs."""


# Every group is a PtbGroup: plain metavars in its help and in its commands' help.
app.add_typer(list_cmd.app, name="list", cls=PtbGroup)
app.add_typer(tasks_cmd.app, name="tasks", cls=PtbGroup)
app.add_typer(data_cmd.app, name="data", cls=PtbGroup)
app.add_typer(traces_cmd.app, name="traces", cls=PtbGroup)
app.add_typer(contamination_cmd.app, name="contamination", cls=PtbGroup)
app.add_typer(results_cmd.app, name="results", cls=PtbGroup)
app.add_typer(sweep_cmd.app, name="sweep", cls=PtbGroup)
app.add_typer(cache_cmd.app, name="cache", cls=PtbGroup)
app.add_typer(agent_task_cmd.app, name="agent-task", cls=PtbGroup)
app.add_typer(agents_cmd.app, name="agents", cls=PtbGroup)
app.command("eval")(eval_cmd.eval_model)
app.command("baseline")(eval_cmd.baseline)
app.command("run")(run_cmd.run)
app.command("demo")(demo_cmd.demo)
app.command("judge")(judge_cmd.judge)
app.command("report")(report_cmd.report)
app.command("rescore")(rescore_cmd.rescore)


def _usage_message(exc: Exception) -> str:
    """A usage error's line: a renamed flag gets its new spelling (README "Commands")."""
    flag = getattr(exc, "option_name", None)
    if flag and hasattr(exc, "possibilities"):  # click's NoSuchOption
        ctx = getattr(exc, "ctx", None)
        hint = renamed_hint(getattr(ctx, "info_name", None), flag)
        if hint:
            return hint
    # Typer words a bad choice as pydantic does ("Value error, 'x' is not one of ...").
    return str(exc.format_message()).replace("Value error, ", "")  # type: ignore[attr-defined]


def main() -> None:
    """Console entry point."""
    # Harbor prices agents' tokens with LiteLLM, which otherwise tries to download its
    # price list (seconds of retries offline); the list it ships is used instead.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of exiting.
        code = app(standalone_mode=False, prog_name="ptb")
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
            message = _usage_message(exc)
            if message:  # empty after a bare `ptb`: the help was the answer
                Console(stderr=True).print(
                    f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True
                )
            sys.exit(2)
        raise
