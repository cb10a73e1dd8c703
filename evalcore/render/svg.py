"""A small SVG plotter for the report page: plain data in, SVG text out.

Exactly what report.html needs and nothing more: line charts (several series,
solid or dashed, optional markers, linear or log x and y axes, vertical
reference lines, a legend) and histograms on shared bins, overlaid or one
panel per series over a shared x axis. No plotting library
is imported, so drawing a report costs milliseconds instead of the second it
takes to import and lay out matplotlib figures.

Charts are ``WIDTH`` x ``HEIGHT`` user units (the size of the PNGs the page
used to embed) and scale with the ``<img>`` that shows them. Every text is
XML-escaped. :func:`data_uri` turns a chart into a ``data:image/svg+xml``
URI, so a page stays one self-contained file with no script.

Structure (relied on by tests and handy for anyone post-processing a chart):
each series is a ``<g class="series" data-series="label">``; line series are
one ``<polyline>``; histogram series are one ``<rect>`` per non-empty bin plus
a step outline; ticks are ``<g class="xtick">``/``<g class="ytick">`` holding a
grid ``<line>`` and the label ``<text>``; reference lines are
``<line class="refline">``; the legend is ``<g class="legend">`` with one
``<g class="legend-entry">`` per entry; a panel of :func:`histogram_panels` is
``<g class="panel" data-series="label">`` holding its own ticks and series.
"""
from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

WIDTH, HEIGHT = 600, 380
#: Matplotlib's "tab10" and "tab20" categorical palettes, as hex.
TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
TAB20 = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd", "#c5b0d5",
         "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d", "#17becf", "#9edae5")
COLORS = {"blue": TAB10[0], "orange": TAB10[1], "green": TAB10[2], "red": TAB10[3], "grey": "#7f7f7f", "black": "#000000"}
DASHED = "6 4"
DOTTED = "1.5 3"
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
#: Rough advance width of a character as a fraction of the font size (for legend layout only).
_CHAR_WIDTH = 0.6
_LEGEND_LABEL_MAX = 40
_MARGIN = {"left": 66, "right": 18, "top": 34, "bottom": 48}


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Series:
    """One line: points (xs, ys), colour, stroke width, dash pattern, markers."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str = "#000000"
    width: float = 1.5
    dash: str | None = None
    markers: bool = False


@dataclass(frozen=True)
class Band:
    """A filled band between ``lows`` and ``highs`` over ``xs`` (an interval around a series)."""

    label: str
    xs: Sequence[float]
    lows: Sequence[float]
    highs: Sequence[float]
    color: str = "#000000"
    opacity: float = 0.18


@dataclass(frozen=True)
class VLine:
    """A vertical reference line at ``x`` (a threshold)."""

    x: float
    color: str = "#000000"
    dash: str | None = DASHED
    width: float = 1.0


@dataclass(frozen=True)
class LegendEntry:
    """A legend row: a line sample (``kind="line"``) or a filled patch."""

    label: str
    color: str
    kind: str = "line"
    dash: str | None = None
    width: float = 1.5
    markers: bool = False


@dataclass(frozen=True)
class Axes:
    """A line chart's axes: its title, the axis labels, the ranges shown and how x and y are ticked.

    ``xlog``/``ylog`` put x/y on a log axis (limits must then be positive) with 1-2-5 ticks under two decades,
    else decade ticks; ``xinteger`` keeps x ticks on integers, ``xticks`` gives them; ``xformat`` writes the x
    tick labels (``xinteger`` ticks as dates, on the trend page).
    """

    title: str
    xlabel: str
    ylabel: str
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    xlog: bool = False
    ylog: bool = False
    xinteger: bool = False
    xticks: Sequence[float] | None = None
    xformat: Callable[[float], str] | None = None


@dataclass(frozen=True)
class Frame:
    """The plot area in pixels and the data ranges it shows."""

    left: float
    top: float
    right: float
    bottom: float
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    xlog: bool = False
    ylog: bool = False

    def x(self, value: float) -> float:
        return scale(value, self.xlim[0], self.xlim[1], self.left, self.right, self.xlog)

    def y(self, value: float) -> float:
        # SVG y grows downwards: the low end of the range is the bottom edge.
        return scale(value, self.ylim[0], self.ylim[1], self.bottom, self.top, self.ylog)


# --------------------------------------------------------------------------- scales and ticks


def scale(value: float, lo: float, hi: float, p0: float, p1: float, log: bool = False) -> float:
    """Pixel of ``value`` on an axis mapping ``lo`` to ``p0`` and ``hi`` to ``p1``.

    Linear: ``p0 + (v - lo) / (hi - lo) * (p1 - p0)``; on a log axis the same
    with log10 of v, lo and hi.
    """
    if log:
        value, lo, hi = math.log10(value), math.log10(lo), math.log10(hi)
    if hi == lo:
        return (p0 + p1) / 2
    return p0 + (value - lo) / (hi - lo) * (p1 - p0)


def nice_step(span: float, max_ticks: int = 7, integer: bool = False) -> float:
    """The smallest step {1, 2, 5} x 10^k giving at most ``max_ticks`` ticks over ``span``.

    A span of s with step d has at most s/d + 1 ticks. ``integer`` allows only
    steps >= 1 (counts, ranks).
    """
    if not (span > 0 and math.isfinite(span)):
        return 1.0
    exponent = math.floor(math.log10(span / max(max_ticks, 2)))
    while True:
        for mantissa in (1, 2, 5):
            step = mantissa * 10.0 ** exponent
            if integer and step < 1:
                continue
            if span / step <= max(max_ticks - 1, 1) + 1e-9:
                return step
        exponent += 1


def linear_ticks(lo: float, hi: float, max_ticks: int = 7, integer: bool = False) -> list[float]:
    """Multiples of :func:`nice_step` inside [lo, hi]: [0, 1] gives 0, 0.2, ..., 1.0; none for an infinite range."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    step = nice_step(hi - lo, max_ticks, integer)
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    # %.12g drops float noise such as 0.6000000000000001.
    return [float(f"{i * step:.12g}") + 0.0 for i in range(first, last + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten inside [lo, hi] (1..1000 gives 1, 10, 100, 1000); linear ticks when there are fewer than two."""
    first, last = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    if last - first < 1:
        return linear_ticks(lo, hi)
    return [float(10.0 ** k) for k in range(first, last + 1)]


def ticks_from(first: float, hi: float, max_ticks: int = 7) -> list[float]:
    """Integer ticks that start at ``first`` (k = 1 of a CMC): ``first``, then the multiples of the nice step
    over [first, hi] that lie at least half a step past it (1..50 gives 1, 10, 20, 30, 40, 50)."""
    step = nice_step(hi - first, max_ticks, integer=True)
    return [float(first)] + [t for t in linear_ticks(first, hi, max_ticks, integer=True) if t - first >= step / 2]


def log_ticks_125(lo: float, hi: float) -> list[float]:
    """Log-axis ticks: 1, 2 and 5 times each power of ten inside [lo, hi] when the axis spans under two
    decades (1..50 gives 1, 2, 5, 10, 20, 50), else the powers of ten alone (:func:`log_ticks`)."""
    if math.log10(hi) - math.log10(lo) >= 2:
        return log_ticks(lo, hi)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [float(f"{m * 10.0 ** k:.12g}") for k in range(first, last + 1) for m in (1, 2, 5)]
    return [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]


def tick_labels(ticks: list[float], log: bool = False) -> list[str]:
    """Tick texts with as many decimals as the step needs (0.2 -> "0.2", 5 -> "5")."""
    if log or len(ticks) < 2:
        return [f"{t:g}" for t in ticks]
    step = min(b - a for a, b in zip(ticks[:-1], ticks[1:]))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return [f"{t + 0.0:.{decimals}f}" for t in ticks]


def padded(lo: float, hi: float, fraction: float = 0.02) -> tuple[float, float]:
    """[lo, hi] widened by ``fraction`` of the span each side (one unit when lo == hi)."""
    if hi <= lo:
        return lo - 0.5, hi + 0.5
    pad = (hi - lo) * fraction
    return lo - pad, hi + pad


# --------------------------------------------------------------------------- SVG pieces


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _num(value: float) -> str:
    """A coordinate with two decimals (a hundredth of a pixel), trailing zeros dropped."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _dash(dash: str | None) -> str:
    return f' stroke-dasharray="{dash}"' if dash else ""


def _truncate(label: str, width: int = _LEGEND_LABEL_MAX) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _legend_font(count: int) -> float:
    return 11.0 if count <= 8 else 9.5


def _entry_width(entries: list[LegendEntry], font: float) -> float:
    """Width of one legend column: sample, gap, longest label, gap."""
    longest = max(len(_truncate(e.label)) for e in entries)
    return 24 + 6 + longest * font * _CHAR_WIDTH + 12


def _below_layout(entries: list[LegendEntry], plot_width: float) -> tuple[int, int]:
    """(columns, rows) of a legend under the axes: up to 4 columns that fit the width."""
    if not entries:
        return 0, 0
    column = _entry_width(entries, _legend_font(len(entries)))
    columns = max(1, min(len(entries), 4, int(plot_width // column)))
    return columns, math.ceil(len(entries) / columns)


def _frame(xlim, ylim, xlog: bool, legend_rows: int, ylog: bool = False) -> Frame:
    """The plot area, leaving room under it for ``legend_rows`` rows of legend."""
    bottom = HEIGHT - _MARGIN["bottom"] - (legend_rows * 16 + 6 if legend_rows else 0)
    return Frame(_MARGIN["left"], _MARGIN["top"], WIDTH - _MARGIN["right"], bottom, tuple(xlim), tuple(ylim), xlog, ylog)


def _axis_ticks(lim: tuple[float, float], log: bool, integer: bool, given: Sequence[float] | None,
                max_ticks: int = 7) -> list[float]:
    """The ticks of one axis: ``given`` (those inside the range), else 1-2-5 or decades on a log axis, else
    round linear steps."""
    if given is not None:
        return [float(t) for t in given if lim[0] - 1e-9 * abs(lim[0]) <= t <= lim[1] + 1e-9 * abs(lim[1])]
    return log_ticks_125(*lim) if log else linear_ticks(*lim, max_ticks, integer=integer)


def _axes(frame: Frame, title: str, xlabel: str, ylabel: str, xinteger: bool, yinteger: bool,
          xformat: Callable[[float], str] | None = None, xticks: Sequence[float] | None = None,
          title_y: float = 21, xaxis: bool = True, ymax_ticks: int = 7) -> list[str]:
    """Grid, ticks with labels, the frame, axis labels and the title; ``xformat`` writes the x tick labels
    (dates from day numbers), ``xticks`` chooses them; ``xaxis=False`` draws the x grid without labels
    (an upper panel over a shared x axis)."""
    xs = _axis_ticks(frame.xlim, frame.xlog, xinteger, xticks)
    xtexts = [xformat(t) for t in xs] if xformat else tick_labels(xs, log=frame.xlog)
    yticks = _axis_ticks(frame.ylim, frame.ylog, yinteger, None, ymax_ticks)
    ytexts = tick_labels(yticks, log=frame.ylog)
    parts = [f'<rect class="plot-area" x="{_num(frame.left)}" y="{_num(frame.top)}" width="{_num(frame.right - frame.left)}" '
             f'height="{_num(frame.bottom - frame.top)}" fill="#ffffff"/>']
    for value, text in zip(xs, xtexts):
        if not xaxis:
            x = _num(frame.x(value))
            parts.append(f'<line x1="{x}" y1="{_num(frame.top)}" x2="{x}" y2="{_num(frame.bottom)}" stroke="#000000" '
                         'stroke-opacity="0.12"/>')
            continue
        x = _num(frame.x(value))
        parts.append(f'<g class="xtick"><line x1="{x}" y1="{_num(frame.top)}" x2="{x}" y2="{_num(frame.bottom + 4)}" stroke="#000000" stroke-opacity="0.12"/>'
                     f'<text x="{x}" y="{_num(frame.bottom + 17)}" text-anchor="middle" font-size="11">{_esc(text)}</text></g>')
    for value, text in zip(yticks, ytexts):
        y = _num(frame.y(value))
        parts.append(f'<g class="ytick"><line x1="{_num(frame.left - 4)}" y1="{y}" x2="{_num(frame.right)}" y2="{y}" stroke="#000000" stroke-opacity="0.12"/>'
                     f'<text x="{_num(frame.left - 7)}" y="{y}" dy="0.32em" text-anchor="end" font-size="11">{_esc(text)}</text></g>')
    middle_x, middle_y = (frame.left + frame.right) / 2, (frame.top + frame.bottom) / 2
    if title:
        parts.append(f'<text class="title" x="{_num(WIDTH / 2)}" y="{_num(title_y)}" text-anchor="middle" font-size="14">{_esc(title)}</text>')
    if xlabel:
        parts.append(f'<text class="xlabel" x="{_num(middle_x)}" y="{_num(frame.bottom + 36)}" text-anchor="middle" font-size="12">{_esc(xlabel)}</text>')
    if ylabel:
        parts.append(f'<text class="ylabel" x="16" y="{_num(middle_y)}" text-anchor="middle" font-size="12" '
                     f'transform="rotate(-90 16 {_num(middle_y)})">{_esc(ylabel)}</text>')
    return parts


def _frame_border(frame: Frame) -> str:
    return (f'<rect class="frame" x="{_num(frame.left)}" y="{_num(frame.top)}" width="{_num(frame.right - frame.left)}" '
            f'height="{_num(frame.bottom - frame.top)}" fill="none" stroke="#333333" stroke-width="0.8"/>')


def _sample(entry: LegendEntry, x: float, y: float) -> str:
    """The 24-pixel legend sample of an entry whose text row is centred on ``y``."""
    if entry.kind == "patch":
        return (f'<rect x="{_num(x)}" y="{_num(y - 5)}" width="24" height="10" fill="{entry.color}" fill-opacity="0.45" '
                f'stroke="{entry.color}"/>')
    line = (f'<line x1="{_num(x)}" y1="{_num(y)}" x2="{_num(x + 24)}" y2="{_num(y)}" stroke="{entry.color}" '
            f'stroke-width="{entry.width}"{_dash(entry.dash)}/>')
    return line + (f'<circle cx="{_num(x + 12)}" cy="{_num(y)}" r="3" fill="{entry.color}"/>' if entry.markers else "")


def _legend(entries: list[LegendEntry], frame: Frame, placement: str) -> str:
    """Legend under the axes (``"below"``) or in the lower right corner inside them."""
    if not entries:
        return ""
    font = _legend_font(len(entries))
    column = _entry_width(entries, font)
    row_height = 16
    if placement == "below":
        columns, rows = _below_layout(entries, frame.right - frame.left)
        width = columns * column
        x0 = (frame.left + frame.right) / 2 - width / 2
        y0 = frame.bottom + 46
        box = ""
    else:
        columns = 1 if len(entries) <= 8 else 2
        rows = math.ceil(len(entries) / columns)
        width = columns * column
        x0 = frame.right - width - 8
        y0 = frame.bottom - rows * row_height - 8
        box = (f'<rect x="{_num(x0 - 4)}" y="{_num(y0 - 4)}" width="{_num(width + 4)}" height="{_num(rows * row_height + 6)}" '
               'fill="#ffffff" fill-opacity="0.85" stroke="#cccccc" rx="3"/>')
    parts = [f'<g class="legend">{box}']
    for i, entry in enumerate(entries):
        # column-major like matplotlib: fill the first column, then the next
        col, row = divmod(i, rows)
        x = x0 + col * column
        y = y0 + row * row_height + row_height / 2
        parts.append(f'<g class="legend-entry">{_sample(entry, x, y)}'
                     f'<text x="{_num(x + 30)}" y="{_num(y)}" dy="0.32em" font-size="{_num(font)}">{_esc(_truncate(entry.label))}</text></g>')
    parts.append("</g>")
    return "".join(parts)


def _svg(parts: list[str]) -> str:
    """The complete SVG document."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" fill="#1d2330">'
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>' + "".join(parts) + "</svg>\n")


def _vline(line: VLine, frame: Frame) -> str:
    x = _num(frame.x(line.x))
    return (f'<line class="refline" x1="{x}" y1="{_num(frame.top)}" x2="{x}" y2="{_num(frame.bottom)}" stroke="{line.color}" '
            f'stroke-width="{line.width}"{_dash(line.dash)}/>')


# --------------------------------------------------------------------------- charts


def line_chart(
    series: Sequence[Series],
    axes: Axes,
    *,
    vlines: Sequence[VLine] = (),
    legend: Sequence[LegendEntry] = (),
    legend_at: str = "lower right",
    bands: Sequence[Band] = (),
) -> str:
    """Lines on shared ``axes``, as SVG text.

    Each series is one polyline through its finite points in the given order
    (non-finite points are skipped, and points <= 0 on a log axis, which has no
    place for them). ``legend_at`` is ``"lower right"`` (inside the axes) or ``"below"``.
    ``bands`` are drawn first, under the lines: one translucent ``<path class="band">`` each.
    """
    entries = list(legend)
    rows = _below_layout(entries, WIDTH - _MARGIN["left"] - _MARGIN["right"])[1] if legend_at == "below" else 0
    xlog, ylog = axes.xlog, axes.ylog
    frame = _frame(axes.xlim, axes.ylim, xlog, rows, ylog)
    parts = _axes(frame, axes.title, axes.xlabel, axes.ylabel, axes.xinteger, False, axes.xformat, axes.xticks)
    parts += [_band(b, frame) for b in bands]
    for item in series:
        points = [(float(x), float(y)) for x, y in zip(item.xs, item.ys) if math.isfinite(float(x)) and math.isfinite(float(y))
                  and (float(x) > 0 or not xlog) and (float(y) > 0 or not ylog)]
        if not points:
            continue
        coords = [(frame.x(x), frame.y(y)) for x, y in points]
        text = " ".join(f"{_num(x)},{_num(y)}" for x, y in coords)
        parts.append(f'<g class="series" data-series="{_esc(item.label)}"><polyline points="{text}" fill="none" stroke="{item.color}" '
                     f'stroke-width="{item.width}" stroke-linejoin="round"{_dash(item.dash)}/>')
        if item.markers:
            parts.append("".join(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="3" fill="{item.color}"/>' for x, y in coords))
        parts.append("</g>")
    parts += [_vline(v, frame) for v in vlines]
    parts += [_frame_border(frame), _legend(entries, frame, legend_at)]
    return _svg(parts)


def _band(band: Band, frame: Frame) -> str:
    points = [(float(x), float(lo), float(hi)) for x, lo, hi in zip(band.xs, band.lows, band.highs)
              if all(math.isfinite(float(v)) for v in (x, lo, hi))]
    if not points:
        return ""
    upper = [f"{_num(frame.x(x))},{_num(frame.y(hi))}" for x, _, hi in points]
    lower = [f"{_num(frame.x(x))},{_num(frame.y(lo))}" for x, lo, _ in reversed(points)]
    return (f'<path class="band" data-series="{_esc(band.label)}" d="M{" L".join(upper + lower)} Z" '
            f'fill="{band.color}" fill-opacity="{band.opacity}" stroke="none"/>')


def scatter_chart(xs: Sequence[float], ys: Sequence[float], *, title: str, xlabel: str, ylabel: str,
                  lim: tuple[float, float], color: str = TAB10[0]) -> str:
    """Points (x, y) on equal axes ``lim`` with the diagonal y = x dashed, as SVG text: one
    ``<g class="series">`` of translucent ``<circle>`` s (non-finite points skipped)."""
    frame = _frame(lim, lim, False, 0)
    parts = _axes(frame, title, xlabel, ylabel, False, False)
    parts.append(f'<line class="refline" x1="{_num(frame.x(lim[0]))}" y1="{_num(frame.y(lim[0]))}" '
                 f'x2="{_num(frame.x(lim[1]))}" y2="{_num(frame.y(lim[1]))}" stroke="#000000" stroke-width="1"'
                 f'{_dash(DASHED)}/>')
    dots = "".join(f'<circle cx="{_num(frame.x(x))}" cy="{_num(frame.y(y))}" r="2.2"/>'
                   for x, y in zip(map(float, xs), map(float, ys)) if math.isfinite(x) and math.isfinite(y))
    parts.append(f'<g class="series" data-series="points" fill="{color}" fill-opacity="0.35">{dots}</g>')
    parts.append(_frame_border(frame))
    return _svg(parts)


def histogram_chart(
    series: Sequence[tuple[str, Sequence[float], str]],
    bins: Sequence[float] | np.ndarray,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    threshold: float | None = None,
    threshold_label: str | None = None,
) -> str:
    """Overlaid, translucent filled histograms on shared ``bins``, as SVG text.

    ``series`` holds (label, values, colour); counts are ``numpy.histogram``
    counts on ``bins`` (last bin closed). A bar's height is proportional to its
    count on a shared y axis from 0 to 1.05 x the largest count (integer
    ticks). The legend under the axes gives each label with its number of
    values, then the threshold line when ``threshold`` is given.
    """
    edges = np.asarray(bins, dtype=float)
    counted = [(label, np.histogram(np.asarray(values, dtype=float), bins=edges)[0], len(values), color)
               for label, values, color in series]
    top = max([int(c.max()) for _, c, _, _ in counted if c.size] + [1])
    lo, hi = float(edges[0]), float(edges[-1])
    if threshold is not None and math.isfinite(threshold):
        lo, hi = min(lo, threshold), max(hi, threshold)
    entries = [LegendEntry(f"{label} (n={n})", color, kind="patch") for label, _, n, color in counted if n]
    if threshold is not None:
        entries.append(LegendEntry(threshold_label or f"threshold {threshold:.4g}", COLORS["black"], dash=DASHED, width=1.0))
    rows = _below_layout(entries, WIDTH - _MARGIN["left"] - _MARGIN["right"])[1]
    frame = _frame(padded(lo, hi), (0.0, top * 1.05), False, rows)
    parts = _axes(frame, title, xlabel, ylabel, False, True)
    base = frame.y(0)
    for label, counts, n, color in counted:
        if not n:
            continue
        bars, outline = [], [f"M{_num(frame.x(edges[0]))},{_num(base)}"]
        for i, count in enumerate(counts):
            x0, x1, y = frame.x(edges[i]), frame.x(edges[i + 1]), frame.y(count)
            outline.append(f"V{_num(y)}H{_num(x1)}")
            if count:
                bars.append(f'<rect x="{_num(x0)}" y="{_num(y)}" width="{_num(x1 - x0)}" height="{_num(base - y)}"/>')
        outline.append(f"V{_num(base)}")
        # crisp edges: anti-aliased seams would show between adjacent translucent bars
        parts.append(f'<g class="series" data-series="{_esc(label)}"><g fill="{color}" fill-opacity="0.45" shape-rendering="crispEdges">{"".join(bars)}</g>'
                     f'<path d="{"".join(outline)}" fill="none" stroke="{color}" stroke-width="1"/></g>')
    if threshold is not None and math.isfinite(threshold):
        parts.append(_vline(VLine(threshold), frame))
    parts += [_frame_border(frame), _legend(entries, frame, "below")]
    return _svg(parts)


#: the smallest height of a bar that holds a value: a bin with one query must show, whatever the panel's peak
MIN_BAR = 1.5
_PANEL_GAP = 20


def _histogram_bars(label: str, counts: np.ndarray, edges: np.ndarray, color: str, frame: Frame) -> str:
    """One ``<g class="series">``: a translucent ``<rect>`` per non-empty bin (at least :data:`MIN_BAR` high)
    and the step outline."""
    base = frame.y(0)
    bars, outline = [], [f"M{_num(frame.x(edges[0]))},{_num(base)}"]
    for i, count in enumerate(counts):
        x0, x1, y = frame.x(edges[i]), frame.x(edges[i + 1]), frame.y(count)
        if count:
            y = min(y, base - MIN_BAR)
            bars.append(f'<rect x="{_num(x0)}" y="{_num(y)}" width="{_num(x1 - x0)}" height="{_num(base - y)}"/>')
        outline.append(f"V{_num(y)}H{_num(x1)}")
    outline.append(f"V{_num(base)}")
    # crisp edges: anti-aliased seams would show between adjacent translucent bars
    return (f'<g class="series" data-series="{_esc(label)}"><g fill="{color}" fill-opacity="0.45" shape-rendering="crispEdges">'
            f'{"".join(bars)}</g><path d="{"".join(outline)}" fill="none" stroke="{color}" stroke-width="1"/></g>')


def histogram_panels(
    series: Sequence[tuple[str, Sequence[float], str]],
    bins: Sequence[float] | np.ndarray,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    threshold: float | None = None,
    threshold_label: str | None = None,
) -> str:
    """One histogram panel per non-empty series, stacked over a shared x axis, as SVG text.

    Why panels and not one overlaid count axis: 22 wrong rank-1 matches (<= 5 a bin) beside 330 right
    ones on one linear axis are bars a pixel high, invisible; a log count axis would show them but make
    1 look like a third of 300 and bend the shapes a reader compares. Stacked panels keep each bin's
    place against the other series and the threshold (the shared x axis, one threshold line through all
    panels) and give each series its own count axis, so its largest bin fills its panel.

    ``series`` holds (label, values, colour); counts are ``numpy.histogram``
    counts on ``bins`` (last bin closed); a panel's y axis runs from 0 to 1.05 x
    its largest count (integer ticks); a non-empty bin is drawn at least
    :data:`MIN_BAR` pixels high. Each panel is a ``<g class="panel"
    data-series="label">`` holding its ticks and its ``<g class="series">``,
    labelled above with the count of values; the legend under the axes
    repeats them, then the threshold line when ``threshold`` is given.
    """
    edges = np.asarray(bins, dtype=float)
    counted = [(label, np.histogram(np.asarray(values, dtype=float), bins=edges)[0], len(values), color)
               for label, values, color in series if len(values)]
    lo, hi = float(edges[0]), float(edges[-1])
    if threshold is not None and math.isfinite(threshold):
        lo, hi = min(lo, threshold), max(hi, threshold)
    entries = [LegendEntry(f"{label} (n={n})", color, kind="patch") for label, _, n, color in counted]
    if threshold is not None:
        entries.append(LegendEntry(threshold_label or f"threshold {threshold:.4g}", COLORS["black"], dash=DASHED, width=1.0))
    rows = _below_layout(entries, WIDTH - _MARGIN["left"] - _MARGIN["right"])[1]
    whole = _frame(padded(lo, hi), (0.0, 1.0), False, rows)
    whole = Frame(whole.left, whole.top + 8, whole.right, whole.bottom, whole.xlim, whole.ylim)  # room for the first label
    count = max(len(counted), 1)
    height = (whole.bottom - whole.top - _PANEL_GAP * (count - 1)) / count
    parts = [f'<text class="ylabel" x="16" y="{_num((whole.top + whole.bottom) / 2)}" text-anchor="middle" font-size="12" '
             f'transform="rotate(-90 16 {_num((whole.top + whole.bottom) / 2)})">{_esc(ylabel)}</text>']
    frame = whole
    for i, (label, counts, n, color) in enumerate(counted):
        top = whole.top + i * (height + _PANEL_GAP)
        peak = max(int(counts.max()), 1)
        frame = Frame(whole.left, top, whole.right, top + height, whole.xlim, (0.0, peak * 1.05))
        last = i == count - 1
        panel = _axes(frame, title if i == 0 else "", xlabel if last else "", "", False, True, xaxis=last, ymax_ticks=4)
        panel.append(_histogram_bars(label, counts, edges, color, frame))
        if threshold is not None and math.isfinite(threshold):
            panel.append(_vline(VLine(threshold), frame))
        # over the panel, in the gap: inside it the label would sit on the bars
        panel.append(f'<text class="panel-label" x="{_num(frame.left)}" y="{_num(frame.top - 4)}" font-size="11" '
                     f'fill="{color}">{_esc(f"{label} (n={n})")}</text>')
        panel.append(_frame_border(frame))
        parts.append(f'<g class="panel" data-series="{_esc(label)}">' + "".join(panel) + "</g>")
    if not counted:
        parts += _axes(whole, title, xlabel, "", False, True) + [_frame_border(whole)]
    parts.append(_legend(entries, whole, "below"))
    return _svg(parts)


def data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...`` of an SVG document, for an ``<img src>``."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def palette(count: int) -> tuple[str, ...]:
    """The categorical palette for ``count`` colours: tab10, or tab20 beyond ten."""
    return TAB10 if count <= 10 else TAB20
