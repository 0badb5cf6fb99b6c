"""Inline SVG charts for the report: grouped bars with reference lines, and scatter plots.

Why hand-written SVG: the report must open offline with JavaScript disabled, so no chart
library can be loaded. Every function is pure (data in, markup out); every label passes
through `escape`, so agent names cannot inject markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# Tableau 10: distinguishable, colour-blind-friendlier than the defaults of most tools.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
BASE_COLOR = "#555555"
INSTRUCT_COLOR = "#2a9d4b"
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"'
CHAR_WIDTH = 6.4  # average width of an 11px sans-serif character, to size legends and margins


@dataclass(frozen=True)
class Bar:
    """One bar: a series' (agent's) value in a group (base model)."""

    group: str
    series: str
    value: float
    err: float | None = None
    fallback: str | None = None  # why the baseline stands in, if it does
    href: str | None = None
    title: str = ""


@dataclass(frozen=True)
class RefLine:
    """A reference score drawn across one group: the base model's baseline or the instruct score."""

    group: str
    kind: str  # "base" or "instruct"
    value: float


@dataclass(frozen=True)
class Point:
    """One run in a scatter plot."""

    x: float
    y: float
    series: str
    href: str | None = None
    title: str = ""
    flagged: bool = False


def series_colors(names: Sequence[str]) -> dict[str, str]:
    """A stable colour per series name, in the given order (the palette repeats after 10)."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least *high* (about *count* intervals)."""
    if not high or high <= 0 or math.isnan(high):
        high = 1.0
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    n = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def _fmt_tick(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1 or value == 0 else f"{value:.2f}".rstrip("0")


def _text(
    x: float, y: float, content: str, *, anchor: str = "start", size: int = 11, extra: str = ""
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f"{extra}>{escape(content)}</text>"
    )


def _linked(inner: str, href: str | None, title: str) -> str:
    tip = f"<title>{escape(title)}</title>" if title else ""
    if href:
        return f'<a href="{escape(href)}">{tip}{inner}</a>'
    return f"<g>{tip}{inner}</g>"


def _y_axis(
    ticks: list[float], left: float, right: float, top: float, bottom: float, label: str
) -> list[str]:
    """Horizontal grid lines with tick labels, and the rotated axis label."""
    top_value = ticks[-1]
    parts = []
    for tick in ticks:
        y = bottom - (bottom - top) * tick / top_value
        parts.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        parts.append(_text(left - 6, y + 4, _fmt_tick(tick), anchor="end"))
    mid = (top + bottom) / 2
    parts.append(
        _text(14, mid, label, anchor="middle", extra=f'transform="rotate(-90 14 {mid:.1f})"')
    )
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}" stroke="#999"/>')
    parts.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#999"/>')
    return parts


def _legend(
    x: float,
    y: float,
    series: Sequence[str],
    colors: dict[str, str],
    extras: Sequence[tuple[str, str]],
) -> list[str]:
    """Colour swatches per series, then (svg swatch, label) extras such as reference lines."""
    parts = []
    for i, name in enumerate(series):
        cy = y + i * 18
        parts.append(
            f'<rect x="{x}" y="{cy - 9}" width="12" height="12" rx="2" fill="{colors[name]}"/>'
        )
        parts.append(_text(x + 18, cy + 1, name))
    for j, (swatch, label) in enumerate(extras):
        cy = y + (len(series) + j) * 18 + 6
        parts.append(swatch.format(x=x, y=cy - 3, x2=x + 14, cx=x + 6))
        parts.append(_text(x + 18, cy + 1, label))
    return parts


def _svg(width: float, height: float, title: str, body: list[str]) -> Markup:
    head = (
        f'<svg class="chart" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(title)}" {FONT}>'
        f"<title>{escape(title)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _legend_width(labels: Sequence[str]) -> float:
    return 30 + CHAR_WIDTH * max((len(s) for s in labels), default=0)


REF_SWATCHES = {
    "base": (
        '<line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" stroke="'
        + BASE_COLOR
        + '" stroke-width="2" stroke-dasharray="4 3"/>',
        "base model (baseline)",
    ),
    "instruct": (
        '<line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" stroke="'
        + INSTRUCT_COLOR
        + '" stroke-width="2" stroke-dasharray="8 3"/>',
        "instruct model",
    ),
}
FALLBACK_SWATCH = (
    '<rect x="{x}" y="{y}" width="12" height="8" fill="#bbb" fill-opacity="0.35" '
    'stroke="#777" stroke-dasharray="2 2"/>',
    "baseline stands in (no valid run)",
)


def grouped_bar_chart(
    title: str,
    groups: Sequence[str],
    series: Sequence[str],
    bars: Sequence[Bar],
    refs: Sequence[RefLine],
    colors: dict[str, str],
    y_label: str = "score",
) -> Markup:
    """Bars per series within each group, error bars for stderr, dashed reference lines per group.

    A bar whose value is a baseline fallback is drawn pale with a dashed outline.
    """
    bar_w, gap, left, top, plot_h = 16, 28, 52, 34, 220
    by_key = {(b.group, b.series): b for b in bars}
    group_w = max(len(series), 1) * bar_w + gap
    plot_w = max(len(groups) * group_w, 160)
    high = max([b.value + (b.err or 0) for b in bars] + [r.value for r in refs] + [0.0])
    ticks = nice_ticks(high)
    bottom, right = top + plot_h, left + plot_w

    def y_of(value: float) -> float:
        return bottom - plot_h * value / ticks[-1]

    body = [_text(left, 18, title, size=13, extra='font-weight="600"')]
    body += _y_axis(ticks, left, right, top, bottom, y_label)
    for gi, group in enumerate(groups):
        x0 = left + gi * group_w + gap / 2
        for si, name in enumerate(series):
            bar = by_key.get((group, name))
            if bar is None:
                continue
            x = x0 + si * bar_w
            y = y_of(bar.value)
            style = (
                f'fill="{colors[name]}" fill-opacity="0.35" stroke="{colors[name]}" stroke-dasharray="3 2"'
                if bar.fallback
                else f'fill="{colors[name]}"'
            )
            shape = (
                f'<rect class="bar{" fallback" if bar.fallback else ""}" x="{x + 1:.1f}" y="{y:.1f}" '
                f'width="{bar_w - 2}" height="{max(bottom - y, 0.5):.1f}" {style}/>'
            )
            if bar.err:
                hi, lo = y_of(bar.value + bar.err), y_of(max(bar.value - bar.err, 0))
                cx = x + bar_w / 2
                shape += (
                    f'<path d="M{cx:.1f} {hi:.1f}V{lo:.1f}M{cx - 3:.1f} {hi:.1f}h6M{cx - 3:.1f} {lo:.1f}h6" '
                    f'stroke="#222" fill="none"/>'
                )
            body.append(_linked(shape, bar.href, bar.title))
        for ref in (r for r in refs if r.group == group):
            color, dash = (BASE_COLOR, "4 3") if ref.kind == "base" else (INSTRUCT_COLOR, "8 3")
            y = y_of(ref.value)
            label = "base model" if ref.kind == "base" else "instruct model"
            body.append(
                _linked(
                    f'<line x1="{x0 - 6:.1f}" x2="{x0 + len(series) * bar_w + 6:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                    f'stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>',
                    None,
                    f"{label} on {group}: {ref.value:.3f}",
                )
            )
        body.append(_text(x0 + len(series) * bar_w / 2, bottom + 16, group, anchor="middle"))
    body.append(
        _text(left + plot_w / 2, bottom + 36, "base model", anchor="middle", extra='fill="#555"')
    )
    extras = [REF_SWATCHES[k] for k in ("base", "instruct") if any(r.kind == k for r in refs)]
    if any(b.fallback for b in bars):
        extras.append(FALLBACK_SWATCH)
    legend_x = right + 24
    body += _legend(legend_x, top + 8, series, colors, extras)
    width = legend_x + _legend_width([*series, *(label for _, label in extras)])
    height = max(bottom + 48, top + 18 * (len(series) + len(extras)) + 24)
    return _svg(width, height, title, body)


def scatter_plot(
    title: str,
    points: Sequence[Point],
    series: Sequence[str],
    colors: dict[str, str],
    x_label: str,
    y_label: str = "score",
) -> Markup:
    """One dot per point, coloured by series; a flagged point is a hollow ring."""
    left, top, plot_w, plot_h = 52, 34, 420, 260
    bottom, right = top + plot_h, left + plot_w
    # 5% headroom keeps the largest point off the plot's right edge.
    x_ticks = nice_ticks(1.05 * max([p.x for p in points] + [0.0]))
    y_ticks = nice_ticks(max([p.y for p in points] + [0.0]))
    body = [_text(left, 18, title, size=13, extra='font-weight="600"')]
    body += _y_axis(y_ticks, left, right, top, bottom, y_label)
    for tick in x_ticks:
        x = left + plot_w * tick / x_ticks[-1]
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#999"/>'
        )
        body.append(_text(x, bottom + 16, _fmt_tick(tick), anchor="middle"))
    body.append(
        _text(left + plot_w / 2, bottom + 36, x_label, anchor="middle", extra='fill="#555"')
    )
    for p in points:
        cx = left + plot_w * p.x / x_ticks[-1]
        cy = bottom - plot_h * p.y / y_ticks[-1]
        color = colors[p.series]
        style = (
            f'fill="#fff" stroke="{color}" stroke-width="2.5"'
            if p.flagged
            else f'fill="{color}" fill-opacity="0.85" stroke="#fff"'
        )
        dot = f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="5.5" {style}/>'
        body.append(_linked(dot, p.href, p.title))
    extras = []
    if any(p.flagged for p in points):
        extras.append(
            (
                '<circle cx="{cx}" cy="{y}" r="5" fill="#fff" stroke="#777" stroke-width="2.5"/>',
                "flagged by a judge",
            )
        )
    present = [s for s in series if any(p.series == s for p in points)]
    legend_x = right + 24
    body += _legend(legend_x, top + 8, present, colors, extras)
    width = legend_x + _legend_width([*present, *(label for _, label in extras)])
    height = max(bottom + 48, top + 18 * (len(present) + len(extras)) + 24)
    return _svg(width, height, title, body)


def loss_chart(x_label: str, points: Sequence[tuple[float, float]]) -> Markup:
    """A training curve: the loss at each step (or epoch) the agent printed."""
    dots = [Point(x=x, y=y, series="loss", title=f"{x_label} {x:g}: loss {y:g}") for x, y in points]
    return scatter_plot("training loss", dots, ["loss"], {"loss": PALETTE[0]}, x_label, "loss")
