"""`ptb report`: the leaderboard, charts and run pages as one self-contained HTML file.

Everything is inline (CSS, SVG), so the file opens offline; run pages switch with CSS
`:target`, so it works with JavaScript disabled. Jinja autoescape escapes every value.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import OutputDirError
from posttrainbench.core.verdict import LOW_AGREEMENT
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.report.charts import (
    Bar,
    Point,
    RefLine,
    grouped_bar_chart,
    loss_chart,
    scatter_plot,
    series_colors,
)
from posttrainbench.host.results.report.run_pages import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_EVENTS,
    build_run_pages,
    run_anchor,
)
from posttrainbench.host.results.table import Cell, Leaderboard

TEMPLATES = Path(__file__).parent / "templates"
FALLBACK_WHY = {
    "missing": "no run",
    "no_model": "no run left a usable final model",
    "errored": "every run errored",
    "flagged": "every run was flagged by a judge",
}
FALLBACK_BADGE = {
    "missing": "missing",
    "no_model": "no model",
    "errored": "errored",
    "flagged": "flagged",
}
# How a run's outcome kind (posttrainbench.core.trial_outcome) reads in the report.
OUTCOME_LABEL = {
    "completed": "completed",
    "no_model": "no model",
    "agent_error": "agent error",
    "infra_error": "infra error",
    "verifier_error": "verifier error",
}


class ReportOutputError(OutputDirError):
    """The report cannot be written where the user asked."""


# ---- number formatting (Jinja filters) -------------------------------------------------


def fmt_score(value: float | None, digits: int = 3) -> str:
    """A score with fixed decimals, or an en dash."""
    return "–" if value is None else f"{value:.{digits}f}"


def fmt_share(value: float | None) -> str:
    """A fraction as a whole percentage."""
    return "–" if value is None else f"{value:.0%}"


def fmt_money(value: float | None) -> str:
    """US dollars with cents."""
    return "–" if value is None else f"${value:,.2f}"


def fmt_tokens(value: int | None) -> str:
    """Token counts shortened: 950, 12.3k, 1.20M."""
    if value is None:
        return "–"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.2f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return str(value)


def fmt_hours(value: float | None) -> str:
    """Hours with one decimal."""
    return "–" if value is None else f"{value:.1f}"


def cell_summary(cell: Cell) -> str:
    """`n=2 × 50 q · norm 0.67`: how many runs a cell's score comes from, the questions each
    was scored on, and its normalized score."""
    parts = []
    if cell.source == "run":
        questions = f" × {cell.n_questions} q" if cell.n_questions is not None else ""
        parts.append(f"n={cell.n_runs}{questions}")
    if cell.ci95 is not None:
        parts.append(f"95% CI {cell.ci95[0]:.2f}–{cell.ci95[1]:.2f}")
    if cell.normalized is not None:
        parts.append(f"norm {cell.normalized:.2f}")
    return " · ".join(parts)


@lru_cache(maxsize=1)
def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        score=fmt_score, share=fmt_share, money=fmt_money, tokens=fmt_tokens, hours=fmt_hours
    )
    env.globals.update(
        run_anchor=run_anchor,
        fallback_why=FALLBACK_WHY,
        fallback_badge=FALLBACK_BADGE,
        outcome_label=OUTCOME_LABEL,
        cell_summary=cell_summary,
        curve_chart=lambda curve: loss_chart(curve.x_label, curve.points),
    )
    return env


# ---- charts from the leaderboard --------------------------------------------------------


def cell_links(board: Leaderboard) -> dict[tuple[str, str, str], str]:
    """(agent, benchmark, base model) -> `#run-<id>` of the run behind the cell: its first
    selected run, else its first run of any status (an errored or flagged one)."""
    links = {
        (c.agent, c.benchmark, c.base_model): "#" + run_anchor(c.selected[0])
        for c in board.cells
        if c.selected
    }
    for row in board.runs:
        links.setdefault((row.agent, row.benchmark, row.base_model), "#" + run_anchor(row.id))
    return links


def benchmark_charts(board: Leaderboard, colors: dict[str, str]) -> list[Markup]:
    """One grouped bar chart per benchmark: agents' cell scores per base model, with references."""
    agents = [a.agent for a in board.agents]
    links = cell_links(board)
    charts = []
    for benchmark in board.benchmarks:
        bars = []
        for cell in board.cells:
            if cell.benchmark != benchmark or cell.score is None:
                continue
            what = (
                f"baseline ({FALLBACK_WHY[cell.fallback]})"
                if cell.source == "baseline" and cell.fallback
                else (f"{cell.n_runs} run(s)")
            )
            bars.append(
                Bar(
                    group=cell.base_model,
                    series=cell.agent,
                    value=cell.score,
                    err=cell.stderr if cell.source == "run" else None,
                    fallback=cell.fallback if cell.source == "baseline" else None,
                    href=links.get((cell.agent, cell.benchmark, cell.base_model)),
                    title=f"{cell.agent} on {cell.base_model}: {cell.score:.3f} from {what}",
                )
            )
        refs = [
            RefLine(group=b.base_model, kind=b.kind, value=b.score)
            for b in board.baselines
            if b.benchmark == benchmark
        ]
        charts.append(
            grouped_bar_chart(
                f"{benchmark}: score per agent and base model",
                board.base_models,
                agents,
                bars,
                refs,
                colors,
            )
        )
    return charts


def scatter_charts(board: Leaderboard, colors: dict[str, str]) -> list[tuple[Markup, int]]:
    """Score against agent hours and against LLM cost; one point per scored run.

    Returns (chart, number of scored runs left out because the axis value is unknown).
    """
    agents = [a.agent for a in board.agents]
    scored = [r for r in board.runs if r.status == "completed" and r.score is not None]
    out = []
    for attr, label, unit in (
        ("agent_hours", "agent time (hours)", "h"),
        ("cost_usd", "LLM cost (USD)", "$"),
    ):
        points = []
        for r in scored:
            x = getattr(r, attr)
            if x is None:
                continue
            shown = f"${x:,.2f}" if unit == "$" else f"{x:.2f} h"
            points.append(
                Point(
                    x=x,
                    y=r.score,
                    series=r.agent,
                    href="#" + run_anchor(r.id),
                    flagged=bool(r.flagged),
                    title=f"{r.agent} · {r.benchmark} × {r.base_model} · attempt {r.attempt}: "
                    f"{r.score:.3f} at {shown}" + (" (flagged)" if r.flagged else ""),
                )
            )
        out.append(
            (
                scatter_plot(
                    f"Score against {label.split(' (')[0]}", points, agents, colors, label
                ),
                len(scored) - len(points),
            )
        )
    return out


# ---- the report -------------------------------------------------------------------------


def agent_parts(
    board: Leaderboard, records: list[ResultRecord]
) -> dict[str, tuple[str, str | None]]:
    """Leaderboard label -> (agent, the rest: its model, and `@<h>h` when budgets are mixed),
    taken from the runs, since a label alone cannot be split (an import path has a colon)."""
    by_id = {r.id: r for r in records}
    parts: dict[str, tuple[str, str | None]] = {}
    for row in board.runs:
        record = by_id.get(row.id)
        if record is not None and row.agent.startswith(record.agent):
            parts.setdefault(
                row.agent, (record.agent, row.agent[len(record.agent) :].lstrip(":") or None)
            )
    return parts


def render_report(
    board: Leaderboard,
    records: list[ResultRecord],
    results_dir: Path,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> str:
    """The whole report as one HTML string (CSS and SVG inline, no script, no external URL)."""
    colors = series_colors([a.agent for a in board.agents])
    grid = {(c.agent, c.benchmark, c.base_model): c for c in board.cells}
    context = dict(
        board=board,
        colors=colors,
        grid=grid,
        links=cell_links(board),
        # label -> (agent, agent model): shown on two lines; the label alone cannot be split
        # safely (an agent may be an import path with a colon).
        agent_parts=agent_parts(board, records),
        bar_charts=benchmark_charts(board, colors),
        scatters=scatter_charts(board, colors),
        pages=build_run_pages(
            board, records, Path(results_dir), max_events=max_events, max_chars=max_chars
        ),
        low_agreement=LOW_AGREEMENT,
        style=Markup((TEMPLATES / "style.css").read_text(encoding="utf-8")),
    )
    return _environment().get_template("report.html.j2").render(context)


def check_output_path(out: Path) -> None:
    """Raise ReportOutputError unless *out* can be (re)written as a file (checked before any work)."""
    if out.is_dir():
        raise ReportOutputError(
            f"{out} is a directory; give a file name such as {out / 'report.html'}"
        )
    parent = out.parent  # Path("report.html").parent is Path(".")
    if not parent.is_dir():
        raise ReportOutputError(f"cannot write {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ReportOutputError(f"cannot write {out}: directory {parent} is not writable")


def write_report(html: str, out: Path) -> Path:
    """Write *html* to *out* atomically: a temp file beside it, then a rename.

    On any failure the temp file is removed and an existing report at *out* is untouched.
    """
    out = Path(out)
    check_output_path(out)
    try:
        write_text_atomic(out, html)  # 0644: a report is meant to be shared
    except OSError as exc:
        raise ReportOutputError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
