"""Root of the `ptb` command line; turns user errors into one line and exit code 2."""

from __future__ import annotations

import importlib
import os
import sys

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.help_format import PtbGroup
from posttrainbench.host.cli.options import renamed_hint

# Each top-level name of `ptb`: (its module in posttrainbench.host.cli, the Typer sub-app or
# command function there, whether it is a group). A command imports only its own module:
# importing all of them cost about 0.3 s of CPU at every start (measured on this
# project's 2-core machine, with compiled bytecode).
_ENTRIES: dict[str, tuple[str, str, bool]] = {
    "list": ("list_cmd", "app", True),
    "tasks": ("tasks_cmd", "app", True),
    "data": ("data_cmd", "app", True),
    "traces": ("traces_cmd", "app", True),
    "contamination": ("contamination_cmd", "app", True),
    "results": ("results_cmd", "app", True),
    "sweep": ("sweep_cmd", "app", True),
    "cache": ("cache_cmd", "app", True),
    "agent-task": ("agent_task_cmd", "app", True),
    "agents": ("agents_cmd", "app", True),
    "eval": ("eval_cmd", "eval_model", False),
    "baseline": ("eval_cmd", "baseline", False),
    "run": ("run_cmd", "run", False),
    "demo": ("demo_cmd", "demo", False),
    "judge": ("judge_cmd", "judge", False),
    "report": ("report_cmd", "report", False),
    "rescore": ("rescore_cmd", "rescore", False),
}


def _version(value: bool) -> None:
    if value:
        import posttrainbench

        typer.echo(f"ptb {posttrainbench.__version__}")
        raise typer.Exit()


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


def build_app(only: str | None = None) -> typer.Typer:
    """The `ptb` application: every command, or with *only*, just that top-level one (what
    a command line that names it needs; help and errors elsewhere get every command)."""
    root = typer.Typer(
        name="ptb",
        cls=PtbGroup,
        help="PostTrainBench: measure how well AI agents post-train base LLMs.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    root.callback()(_root)
    for name, (module_name, attribute, is_group) in _ENTRIES.items():
        if only is not None and name != only:
            continue
        found = getattr(
            importlib.import_module(f"posttrainbench.host.cli.{module_name}"), attribute
        )
        if is_group:
            # Every group is a PtbGroup: plain metavars in its help and in its commands' help.
            root.add_typer(found, name=name, cls=PtbGroup)
        else:
            root.command(name)(found)
    return root


def __getattr__(name: str) -> typer.Typer:
    """`app`: the whole application, built on first use (tests drive it with CliRunner)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(name)


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


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


def main() -> None:
    """Console entry point."""
    # Harbor prices agents' tokens with LiteLLM, which otherwise tries to download its
    # price list (seconds of retries offline); the list it ships is used instead.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of exiting.
        named = sys.argv[1] if len(sys.argv) > 1 else None
        ptb = build_app(named if named in _ENTRIES else None)
        code = ptb(standalone_mode=False, prog_name="ptb")
        if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into this exit code, silently
            raise KeyboardInterrupt
        if isinstance(code, int) and code:
            sys.exit(code)
    except PtbError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted; everything written so far is kept")
        sys.exit(EXIT_INTERRUPTED)
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
