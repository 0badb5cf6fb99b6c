"""`ptb results export|import|collect|flagged`: Harbor jobs (or PostTrainBench's results) into a
results store, a store into PostTrainBench's layout, and a leaderboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.core.errors import PtbError
from posttrainbench.core.verdict import JudgeId
from posttrainbench.host.cli.options import Json, out_option
from posttrainbench.host.results.table import Policy

Layout = Literal["store", "ptb"]

app = typer.Typer(
    help="Export Harbor jobs into a results store (or a store into PostTrainBench's layout); "
    "import PostTrainBench's results; build the leaderboard; list flagged runs.",
    no_args_is_help=True,
)

PolicyOpt = typer.Option(
    "mean",  # a Policy (results.table)
    "--policy",
    help="Which runs make a cell's score when there are several: "
    "mean (of all scored runs), latest or best; ptb: PostTrainBench's collect.py rule "
    "(the latest run, any outcome; its baseline unless that run scored and is clean).",
)
AllVersionsOpt = typer.Option(
    False,
    "--all-versions",
    help="Let a cell mix scores from several task versions (default: the newest version "
    "only, with a note; see `ptb rescore`).",
)
WeightsOpt = typer.Option(
    None,
    "--weights",
    metavar="FILE",
    help='Per-benchmark weights JSON: {"weights": {"<benchmark>": w}} '
    "(default: PostTrainBench's factors.json).",
)
BaselinesOpt = typer.Option(
    None,
    "--baselines",
    metavar="FILE",
    help="Extra base/instruct scores: a JSON list of "
    "{benchmark, model, kind, score, provenance} (wins over the catalog).",
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _warn(console: Console, lines: list[str], what: str) -> None:
    for line in lines:
        console.print(f"warning: {what}: {escape(line)}", highlight=False, soft_wrap=True)


@app.command("export")
def export_cmd(
    jobs: list[Path] = typer.Argument(
        ..., metavar="JOBS...", help="Harbor jobs dirs, job dirs, trial dirs or ptb run dirs."
    ),
    to: Path = out_option(..., "The results store (created if new)."),
    with_final_model: bool = typer.Option(
        False,
        "--with-final-model",
        help="Also copy each run's final_model/ (such a run is stored as a directory, "
        "runs/<id>/, where `ptb rescore` reads it).",
    ),
    workers: int | None = typer.Option(
        None, "--workers", metavar="N", help="Processes reading trials (default: one per CPU)."
    ),
    keep_volumes: bool = typer.Option(
        False,
        "--keep-volumes",
        help="Keep cloud trials' final_model volumes "
        "(by default each is removed once its run is stored).",
    ),
    layout: Layout = typer.Option(
        "store",
        "--layout",
        help="store: Harbor trials into a results store. ptb: a results store (one "
        "JOBS argument) into PostTrainBench's results layout, for its scripts/collect.py.",
    ),
    all_versions: bool = AllVersionsOpt,
    as_json: bool = Json,
) -> None:
    """Export finished trials (one run record each); again later adds only what is new or changed.

    With --layout ptb, write a results store as PostTrainBench's results directory
    (<method>/<benchmark>_<org>_<model>_<run id>/); its collect.py then gives the cells of
    `ptb results collect --policy ptb`. Exit 2 when a run was left out.

    Example: ptb results export ptb-runs/ ptb-sweeps/my-sweep -o results/

    Example: ptb results export results/ --layout ptb -o ptb_results/
    """
    if layout == "ptb":
        _export_ptb(jobs, to, with_final_model, all_versions, as_json)
        return
    from posttrainbench.host.results.export import export
    from posttrainbench.host.results.export_progress import ExportProgress

    err = Console(stderr=True)
    # Progress on stderr: one updating line on a terminal, a plain line every few seconds
    # in a log; none with --json (machine-read output).
    bar = None if as_json else ExportProgress()
    try:
        summary = export(
            jobs,
            to,
            with_final_model=with_final_model,
            workers=workers,
            keep_volumes=keep_volumes,
            progress=bar,
        )
    finally:
        if bar is not None:
            bar.close()
    if as_json:
        typer.echo(summary.model_dump_json(indent=2))
        return
    _warn(err, summary.skipped, "skipped")
    _warn(err, summary.warnings, "stored")
    if summary.agent_checks:
        err.print(
            f"left out {len(summary.agent_checks)} `ptb agents check` run(s): checks against "
            "a scripted model, not agent runs",
            highlight=False,
        )
    if summary.volumes_removed:
        err.print(
            f"removed {len(summary.volumes_removed)} cloud final_model volume(s) of stored runs",
            highlight=False,
        )
    Console().print(
        f"exported to {escape(summary.results_dir)}: {len(summary.added)} added, {len(summary.updated)} updated, "
        f"{summary.unchanged} unchanged, {len(summary.in_progress)} still running, {len(summary.skipped)} skipped",
        highlight=False,
        soft_wrap=True,
    )


def _export_ptb(
    sources: list[Path], to: Path, with_final_model: bool, all_versions: bool, as_json: bool
) -> None:
    from posttrainbench.host.results.ptb_export import export_ptb

    if len(sources) != 1:
        raise PtbError(
            "--layout ptb reads one results store; export Harbor jobs into one first "
            "(ptb results export JOBS -o STORE)"
        )
    summary = export_ptb(
        sources[0], to, with_final_model=with_final_model, all_versions=all_versions
    )
    if as_json:
        typer.echo(summary.model_dump_json(indent=2))
    else:
        err = Console(stderr=True)
        _warn(err, summary.skipped, "skipped")
        _warn(err, summary.warnings, "written")
        Console().print(
            f"wrote {summary.runs} run(s) of {len(summary.methods)} method(s) to "
            f"{escape(summary.out_dir)}, {len(summary.skipped)} skipped",
            highlight=False,
            soft_wrap=True,
        )
    if summary.skipped:
        raise typer.Exit(2)


@app.command("import")
def import_cmd(
    ptb_dir: Path = typer.Argument(
        ..., metavar="DIR", help="A PostTrainBench results directory (<method>/<run dir>/)."
    ),
    to: Path = out_option(..., "The results store (created if new)."),
    as_json: bool = Json,
) -> None:
    """Import PostTrainBench's results (its HTCondor runs) into a results store.

    Each method becomes an agent of the leaderboard; a run dir that cannot be mapped is
    listed, one line each, and left out (exit 2); nothing stored changes for it.

    Example: ptb results import $POST_TRAIN_BENCH_RESULTS_DIR -o results/
    """
    from posttrainbench.host.results.ptb_import import import_ptb

    summary = import_ptb(ptb_dir, to)
    if as_json:
        typer.echo(summary.model_dump_json(indent=2))
    else:
        err = Console(stderr=True)
        _warn(err, summary.skipped, "skipped")
        for line in summary.ignored:
            err.print(
                f"note: ignored {escape(line)} (its collect.py skips it too)",
                highlight=False,
                soft_wrap=True,
            )
        Console().print(
            f"imported into {escape(summary.results_dir)}: {len(summary.added)} added, "
            f"{len(summary.updated)} updated, {summary.unchanged} unchanged, "
            f"{len(summary.skipped)} skipped",
            highlight=False,
            soft_wrap=True,
        )
    if summary.skipped:
        raise typer.Exit(2)


def load_store(results_dir: Path):
    """(records, skipped lines) of an existing results store."""
    from posttrainbench.host.results.store import ResultsStore

    return ResultsStore.open(results_dir, create=False).load()


def build_leaderboard(
    results_dir: Path,
    policy: str,
    weights: Path | None,
    baselines: Path | None,
    all_versions: bool = False,
):
    """Load the store and collect its leaderboard (shared with `ptb report`)."""
    from posttrainbench.host.results.collect import collect
    from posttrainbench.host.results.reference_scores import load_baseline_file, load_weights
    from posttrainbench.host.results.selection import POLICIES

    if policy not in POLICIES:
        raise PtbError(f"unknown --policy {policy!r}; choose one of: {', '.join(POLICIES)}")
    weight_map = load_weights(weights)
    extra = load_baseline_file(baselines) if baselines is not None else []
    records, skipped = load_store(results_dir)
    board = collect(
        records,
        results_dir=results_dir,
        policy=policy,
        weights=weight_map,
        baselines=extra,
        skipped=skipped,
        all_versions=all_versions,
    )
    return board, records


@app.command("collect")
def collect_cmd(
    results_dir: Path = typer.Argument(..., help="A results store (from `ptb results export`)."),
    policy: Policy = PolicyOpt,
    weights: Path | None = WeightsOpt,
    baselines: Path | None = BaselinesOpt,
    all_versions: bool = AllVersionsOpt,
    out: Path | None = out_option(None, "Output directory (default RESULTS_DIR/leaderboard)."),
    as_json: bool = Json,
) -> None:
    """Build the leaderboard: leaderboard.json, agents.csv, cells.csv and runs.csv.

    Example: ptb results collect results/ --policy best
    """
    from posttrainbench.host.results.outputs import write_leaderboard

    board, _ = build_leaderboard(results_dir, policy, weights, baselines, all_versions)
    write_leaderboard(board, out or results_dir / "leaderboard")
    if as_json:
        typer.echo(board.model_dump_json(indent=2))
        return
    from rich.table import Table  # here: the other commands never draw one

    _warn(Console(stderr=True), board.skipped, "skipped")
    # Per-benchmark scores are in agents.csv and the report; the terminal gets the summary.
    table = Table(
        title=f"PostTrainBench leaderboard ({len(board.runs)} run(s), policy {board.policy})"
    )
    for column in (
        "#",
        "agent",
        "w.avg",
        "avg",
        "norm",
        "base",
        "flag",
        "no model",
        "err",
        "cost $",
        "GPU-h",
        "time",
    ):
        table.add_column(
            column, no_wrap=column != "agent", justify="left" if column == "agent" else "right"
        )
    for a in board.agents:
        table.add_row(
            str(a.rank),
            escape(a.agent),
            _fmt(a.weighted_average),
            _fmt(a.average),
            _fmt(a.normalized_average),
            f"{a.n_fallback}/{a.n_cells}",
            str(a.n_flagged),
            str(a.n_no_model),
            str(a.n_errored),
            _fmt(a.cost_usd, 2),
            _fmt(a.gpu_hours, 1),
            "-" if a.time_fraction is None else f"{a.time_fraction:.0%}",
        )
    console = Console()
    if not console.is_terminal:  # piped or logged: no need to squeeze into 80 columns
        console = Console(width=max(console.width, 140))
    console.print(table)
    for cell in board.cells:
        if cell.version_note:
            console.print(
                f"note: {escape(cell.agent)} on {cell.benchmark}/{cell.base_model}: "
                f"{escape(cell.version_note)}",
                highlight=False,
                soft_wrap=True,
            )
    console.print(f"written to {escape(str(out or results_dir / 'leaderboard'))}", highlight=False)


@app.command("flagged")
def flagged_cmd(
    results_dir: Path = typer.Argument(..., help="A results store."),
    judge: JudgeId | None = typer.Option(None, "--judge", help="Only runs this judge flagged."),
    as_json: bool = Json,
) -> None:
    """List the runs a judge flagged, with each judge's justification.

    Example: ptb results flagged results/ --judge contamination
    """
    from posttrainbench.host.results.flagged import flagged_runs

    records, skipped = load_store(results_dir)
    runs = flagged_runs(records, judge)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return
    _warn(Console(stderr=True), skipped, "skipped")
    console = Console()
    for r in runs:
        console.print(
            f"[bold]{escape(r.agent)}[/] {r.benchmark} x {r.base_model}  {escape(r.trial_name)} "
            f"(job {escape(r.job_name)}, score {_fmt(r.score)})",
            highlight=False,
            soft_wrap=True,
        )
        for v in r.verdicts:
            console.print(
                f"  {v.judge} ({v.decided_by}): {escape(v.justification)}",
                highlight=False,
                soft_wrap=True,
            )
    what = f"flagged by {judge}" if judge else "flagged"
    console.print(f"{len(runs)} of {len(records)} runs {what}", highlight=False)
