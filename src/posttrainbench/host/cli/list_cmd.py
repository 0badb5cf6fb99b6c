"""`ptb list benchmarks|models|baselines`: show the catalog."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from posttrainbench.host.catalog import list_benchmarks, list_models
from posttrainbench.host.cli.options import Json as JsonFlag

app = typer.Typer(help="Show the benchmarks and base models in the catalog.", no_args_is_help=True)


@app.command("benchmarks")
def benchmarks(as_json: bool = JsonFlag) -> None:
    """List the benchmarks.

    Example: ptb list benchmarks --json
    """
    items = list_benchmarks()
    if as_json:
        typer.echo(json.dumps([b.model_dump() for b in items], indent=2))
        return
    table = Table("id", "name", "judged by", "data")
    for b in items:
        table.add_row(b.id, b.display_name, "LLM" if b.llm_judge else "rules", b.data_source)
    Console().print(table)


@app.command("models")
def models(as_json: bool = JsonFlag) -> None:
    """List the base models (the ids -M/--base-model takes).

    Example: ptb list models
    """
    items = list_models()
    if as_json:
        typer.echo(json.dumps([m.model_dump() for m in items], indent=2))
        return
    table = Table("id", "name", "source", "params (B)")
    for m in items:
        table.add_row(m.id, m.display_name, m.source, f"{m.params_b:g}")
    Console().print(table)


@app.command("baselines")
def baselines(
    benchmark: str | None = typer.Option(
        None, "-b", "--benchmark", metavar="ID", help="Only this benchmark."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """List the reference scores (base and instruct models) with their provenance: the
    benchmarks' published numbers and what `ptb baseline` measured on this machine.

    Example: ptb list baselines -b gsm8k
    """
    from posttrainbench.host.catalog.baselines import list_baselines
    from posttrainbench.host.data.measured_baselines import load_measured

    # The published numbers, then what `ptb baseline` measured here (machine and date).
    found = [*list_baselines(), *(m.entry() for m in load_measured())]
    items = [b for b in found if benchmark is None or b.benchmark == benchmark]
    if as_json:
        typer.echo(json.dumps([b.model_dump() for b in items], indent=2))
        return
    table = Table("benchmark", "model", "kind", "score", "provenance")
    for b in items:
        table.add_row(b.benchmark, b.model, b.kind, f"{b.score:.3f}", b.provenance)
    Console().print(table)
