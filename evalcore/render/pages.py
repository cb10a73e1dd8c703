"""Human-readable renderings of a report folder: one HTML page, a trend page, plain text.

Everything here is a pure function of pyarrow tables and the ``run.json`` dict
(reading a report folder is :func:`evalcore.io.report.read_report`). Pages are
self-contained: CSS is inline and plots are inline images (``data:`` URIs), so
a page can be mailed, archived or opened from an object store without
anything else.

Every page draws its plots as SVG with :mod:`evalcore.render.svg` (no
plotting library: rendering a page takes milliseconds); the trend page's x
axis counts days and labels them as dates.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import math
from collections.abc import Mapping, Set

import numpy as np
import pyarrow as pa

from evalcore.core import openset, registry
from evalcore.errors import OptionError
from evalcore.render import svg

#: Columns of :func:`worst_queries`, in order (those present in per_query): who the query is (key, identity,
#: camera), how bad (AP, the best relevant item's rank and score), and what beat it (the rank-1 item and score)
WORST_COLUMNS = ("query", "key", "label", "cam", "ap", "first_rank", "relevant_score", "top1_key", "top1_score")
#: Worst queries shown on the HTML page.
N_WORST = 20
#: Display labels of the columns that are not metrics; a metric's (``hit_at_5``: ``hit@5``) is in core.registry.
LABELS = {
    "group": "group", "n_queries": "queries", "n_evaluated": "evaluated", "n_unknown": "unknown",
    "threshold": "threshold", "tp": "TP", "fp": "FP", "fn": "FN", "tn": "TN",
    "rejection_accuracy": "rejection acc.", "fpir": "FPIR", "fnir": "FNIR",
    "known_accepted_correct": "known accepted correct", "known_accepted_wrong": "known accepted wrong",
    "known_rejected": "known rejected", "unknown_accepted": "unknown accepted", "unknown_rejected": "unknown rejected",
    "query": "query", "key": "key", "top1_key": "rank-1 key", "top1_score": "rank-1 score",
    "relevant_score": "best relevant score", "label": "identity", "cam": "camera", "n_relevant": "relevant items",
    "n_junk": "junk items", "n_judged": "judged items",
    "target_fpir": "target FPIR", "threshold_at_target_fpir": "threshold at target FPIR",
    "fnir_at_target_fpir": "FNIR at target FPIR",
}
#: a summary's interval bounds (``--ci``): shown in the intervals table, not beside the means
_CI_SUFFIXES = ("_ci_low", "_ci_high")
#: The counts that lead the summary tables; the metrics follow in the registry's order.
_COUNTS = ("n_queries", "n_evaluated", "n_unknown")
#: a report written before the split counts: its open-set columns as they were shown then
_OPEN_SET = ("threshold", "tp", "fp", "fn", "tn", "rejection_accuracy", "fpir", "fnir")
_TERMINAL_OPEN_SET = ("threshold", "tp", "fp", "fn", "tn", "fpir", "fnir")
_FNIR_RULE = "FNIR = (known accepted wrong + known rejected) / known queries"
_FPIR_RULE = "FPIR = unknown accepted / unknown queries"
#: each rate beside the counts it is computed from (core.openset): the known queries, then the unknown ones,
#: then TP/FP/FN/TN, which count both together (so FP / (FP + TN) is not the FPIR)
_OPEN_SET_SECTIONS = (
    (f"Open set at the threshold, known queries: {_FNIR_RULE}",
     ("threshold", "known_accepted_correct", "known_accepted_wrong", "known_rejected", "fnir")),
    (f"Open set at the threshold, unknown queries: {_FPIR_RULE}; rejection accuracy = unknown rejected / "
     "unknown queries", ("unknown_accepted", "unknown_rejected", "fpir", "rejection_accuracy")),
    ("Open set at the threshold, all queries together by their rank-1 item: TP accepted and correct, FP accepted "
     "and wrong, FN rejected and correct, TN rejected and wrong", ("tp", "fp", "fn", "tn")),
)
_TERMINAL_OPEN_SET_BLOCKS = (
    (f"Open set, known queries: {_FNIR_RULE}",
     ("threshold", "known_accepted_correct", "known_accepted_wrong", "known_rejected", "fnir")),
    (f"Open set, unknown queries: {_FPIR_RULE}", ("unknown_accepted", "unknown_rejected", "fpir")),
)
#: Shorter headers for the worst-queries text table.
_TERMINAL_LABELS = {"top1_score": "score", "relevant_score": "rel.score", "first_rank": "1st rel"}
_TREND_KEYS = ("run_date", "evaluation", "group")
#: in place of the worst queries when the run did not compute AP (--metrics without map)
_NO_AP = "No worst queries: they are ranked by AP, which is not among the metrics of this run (--metrics)."
_PREFERRED_METRICS = ("map", "minp", "mrr", "map_trapz")


# --------------------------------------------------------------------------- tables


def _column(table: pa.Table, name: str) -> list | None:
    """The column as a Python list, or None when the table lacks it."""
    return table.column(name).to_pylist() if name in table.column_names else None


def _query_ids(per_query: pa.Table) -> list:
    """The ``query`` column, or the row index when the table has none."""
    ids = _column(per_query, "query")
    return ids if ids is not None else list(range(per_query.num_rows))


def _is_missing(value) -> bool:
    """True for null and NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _known_mask(per_query: pa.Table) -> np.ndarray:
    """Queries with at least one relevant item (``n_relevant > 0``).

    Without an ``n_relevant`` column every query with an AP counts as known.
    """
    n_rel = _column(per_query, "n_relevant")
    if n_rel is not None:
        return np.array([v is not None and v > 0 for v in n_rel], dtype=bool)
    ap = _column(per_query, "ap")
    if ap is not None:
        return np.array([not _is_missing(v) for v in ap], dtype=bool)
    return np.ones(per_query.num_rows, dtype=bool)


def _evaluated_mask(per_query: pa.Table) -> np.ndarray:
    """The queries the summary's means (and its ``n_evaluated``) count: the known ones, plus any query with
    no relevant item that has an AP all the same (scored 0 under ``--empty-queries zero``)."""
    ap = _column(per_query, "ap")
    if ap is None:
        return _known_mask(per_query)
    return _known_mask(per_query) | np.array([not _is_missing(v) for v in ap], dtype=bool)


def _unknown_mask(per_query: pa.Table) -> np.ndarray:
    """Open-set queries (``n_relevant == 0``); all False without the column."""
    n_rel = _column(per_query, "n_relevant")
    if n_rel is None:
        return np.zeros(per_query.num_rows, dtype=bool)
    return np.array([v == 0 for v in n_rel], dtype=bool)


def _floats(values: list | None, n: int, missing: float) -> np.ndarray:
    """Float array of ``values`` with null/NaN replaced by ``missing``."""
    if values is None:
        return np.full(n, missing)
    return np.array([missing if _is_missing(v) else float(v) for v in values], dtype=float)


def worst_queries(per_query: pa.Table, n: int | None = 20) -> pa.Table:
    """The failure table of a retrieval write-up: the ``n`` worst evaluated queries.

    Evaluated queries (``n_relevant > 0``, or an AP all the same: scored 0
    under ``--empty-queries zero``, as the summary counts them) are sorted
    worst first: by ``ap`` ascending (null AP worst), then ``first_rank``
    descending with a null first rank (nothing relevant ranked) worst, then
    query index ascending. Columns are those of :data:`WORST_COLUMNS` present
    in ``per_query``; ``n=None`` keeps every evaluated query.
    """
    columns = [c for c in WORST_COLUMNS if c in per_query.column_names]
    rows = np.flatnonzero(_evaluated_mask(per_query))
    if rows.size:
        count = per_query.num_rows
        ap = _floats(_column(per_query, "ap"), count, -math.inf)[rows]
        first = _floats(_column(per_query, "first_rank"), count, math.inf)[rows]
        query = np.array([i if i is not None else -1 for i in _query_ids(per_query)])[rows]
        # lexsort: last key is primary; -first_rank sorts descending, -inf (null) first.
        rows = rows[np.lexsort((query, -first, ap))]
    if n is not None:
        rows = rows[: max(int(n), 0)]
    return per_query.select(columns).take(pa.array(rows, type=pa.int64()))


def _k_sort_key(name: str) -> tuple:
    """Sort key putting ``hit_at_2`` before ``hit_at_10`` (a metric column with a cut-off, core.registry)."""
    column = registry.lookup(name)
    return (name.rsplit("_at_", 1)[0], column.k) if column is not None and column.k is not None else (name, 0)


def _summary_sections(columns: list[str]) -> list[tuple[str, list[str]]]:
    """Summary columns grouped by topic for the HTML page; empty sections dropped."""
    ranking = [c for c in _COUNTS if c in columns] + registry.display_order(columns, "ranking")
    recall = registry.display_order(columns, "cutoff")
    open_set = [(name, [c for c in cols if c in columns]) for name, cols in _open_set_sections(columns)]
    used = set(ranking) | set(recall) | {c for _, cols in open_set for c in cols} | {"group"}
    ranking += [c for c in columns if c not in used and not c.endswith(_CI_SUFFIXES)]
    sections = [("Ranking", ranking), ("Recall and precision at k", recall), *open_set]
    return [(name, cols) for name, cols in sections if cols]


def _open_set_sections(columns: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The open-set tables: each rate beside its counts, or one table for a report without the split counts."""
    if any(c in columns for c in openset.SPLIT_COUNTS):
        return list(_OPEN_SET_SECTIONS)
    return [("Open set at the threshold", _OPEN_SET)]


def _label(name: str) -> str:
    """Short display label of a column name."""
    if name in LABELS:
        return LABELS[name]
    for suffix in _CI_SUFFIXES:
        if name.endswith(suffix) and name != suffix:
            return f"{_label(name[: -len(suffix)])} {suffix.rsplit('_', 1)[1]}"
    # a column no table names (a newer report's): its words, not its snake_case
    return registry.label(name) or name.replace("_", " ")


def _fmt(value, missing: str = "–") -> str:
    """Cell text: floats to 4 decimals, null as ``missing``."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else str(value)
    return str(value)


# --------------------------------------------------------------------------- plots


def _group_colors(groups: list[str]) -> dict[str, str]:
    """A hex colour per group from the tab10 (tab20 beyond 10 groups) palette; ``all`` is black."""
    palette = svg.palette(len(groups))
    others = [g for g in groups if g != "all"]
    colors = {g: palette[i % len(palette)] for i, g in enumerate(others)}
    colors["all"] = svg.COLORS["black"]
    return colors


def _groups_in_order(values: list) -> list[str]:
    """Distinct group names, ``all`` first, else first-seen order."""
    seen = list(dict.fromkeys("all" if v is None else str(v) for v in values))
    return (["all"] if "all" in seen else []) + [g for g in seen if g != "all"]


#: ``cmc_scale`` of the report page: ``auto`` draws rank k on a log axis beyond k = 100
CMC_SCALES = ("auto", "linear", "log")


def _plot_cmc(cmc: pa.Table, scale: str = "auto") -> str | None:
    """CMC curves, one line per group; None without data.

    The x axis (rank k) is logarithmic with ``scale="log"``, or with ``"auto"``
    beyond k = 100; else linear on integer ticks that start at k = 1 (the
    rank-1 accuracy is the point read first). Markers when a curve has at
    most 20 points.
    """
    if scale not in CMC_SCALES:
        raise OptionError("cmc_scale", f"{scale!r} is not one of {', '.join(CMC_SCALES)}")
    k = _column(cmc, "k")
    values = _column(cmc, "cmc")
    if not k or values is None:
        return None
    groups = _column(cmc, "group") or ["all"] * len(k)
    groups = ["all" if g is None else str(g) for g in groups]
    order = _groups_in_order(groups)
    lines = {name: sorted((kk, v) for kk, v, g in zip(k, values, groups) if g == name and kk is not None and not _is_missing(v))
             for name in order}
    if not any(lines.values()):
        return None  # no known query (Q = 0, or G = 0): an empty plot would only warn about an empty legend
    colors = _group_colors(order)
    series = []
    for name in order:
        points = lines[name]
        if points:
            xs, ys = zip(*points)
            series.append(svg.Series(name, xs, ys, colors[name], width=2.2 if name == "all" else 1.4, markers=len(xs) <= 20))
    if not series:
        return None  # every value null (no known queries): a note, not empty axes
    max_k = max(kk for kk in k if kk is not None)
    legend = [svg.LegendEntry(s.label, s.color, width=s.width, markers=s.markers) for s in series]
    bands = _cmc_bands(cmc, k, groups, colors)
    if bands:
        legend.append(svg.LegendEntry(f"all: {bands[0].label}", colors["all"], kind="patch"))
    lowest = min([y for s in series for y in s.ys] + [lo for b in bands for lo in b.lows if not _is_missing(lo)])
    y0 = fitted_floor(lowest)
    xlog = scale == "log" or (scale == "auto" and max_k > 100)
    top = max(max_k, 2)
    return svg.data_uri(svg.line_chart(
        series, svg.Axes(title="Cumulative match characteristic", xlabel="rank k" + (" (log scale)" if xlog else ""),
                         ylabel="CMC (fraction with a match in top k)", xlim=(1, top), ylim=(y0, 1 + 0.02 * (1 - y0)),
                         xlog=xlog, xinteger=True, xticks=None if xlog else svg.ticks_from(1, top)),
        legend=legend, legend_at="lower right", bands=bands,
    ))


def fitted_floor(lowest: float) -> float:
    """The bottom of a y axis fitted to curves that rise to 1 from ``lowest``: a margin of a tenth of the
    span (at least 0.005) below it, rounded down to a round step; on a 0..1 axis a CMC that starts at 0.99
    is a flat line at the top."""
    y0 = lowest - max(0.005, 0.1 * (1 - lowest))
    step = 0.05 if 1 - lowest > 0.2 else 0.01 if 1 - lowest > 0.04 else 0.005
    return max(0.0, math.floor(y0 / step + 1e-9) * step)


def _cmc_bands(cmc: pa.Table, k: list, groups: list[str], colors: dict[str, str]) -> list:
    """The ``all`` curve's interval band when the CMC has ``ci_low``/``ci_high`` (``--ci``)."""
    low, high = _column(cmc, "ci_low"), _column(cmc, "ci_high")
    if low is None or high is None:
        return []
    points = sorted((kk, lo, hi) for kk, lo, hi, g in zip(k, low, high, groups)
                    if g == "all" and not _is_missing(lo) and not _is_missing(hi))
    if not points:
        return []
    xs, lows, highs = zip(*points)
    return [svg.Band("interval", xs, lows, highs, colors["all"])]


def _plot_histograms(series: list[tuple[str, list, str]], title: str, threshold: float | None) -> str | None:
    """Score histograms on 30 shared bins over the scores' range, one panel per series over a shared x axis
    (svg.histogram_panels: a small class stays visible beside a large one); None when every series is empty.

    ``series`` holds (label, values, colour) triples.
    """
    series = [(name, [float(v) for v in vals if not _is_missing(v)], color) for name, vals, color in series]
    if not any(vals for _, vals, _ in series):
        return None
    every = np.concatenate([np.asarray(vals) for _, vals, _ in series if vals])
    lo, hi = float(every.min()), float(every.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    bins = np.linspace(lo, hi, 31)
    return svg.data_uri(svg.histogram_panels(series, bins, title=title, xlabel="rank-1 score", ylabel="queries", threshold=threshold))


def _plot_sweep(sweep: pa.Table, threshold: float | None) -> str | None:
    """FPIR (solid) and FNIR (dashed) against the threshold, per group."""
    thresholds = _column(sweep, "threshold")
    if not thresholds or ("fpir" not in sweep.column_names and "fnir" not in sweep.column_names):
        return None
    groups = ["all" if g is None else str(g) for g in (_column(sweep, "group") or ["all"] * len(thresholds))]
    order = _groups_in_order(groups)
    colors = _group_colors(order)
    series, legend, plotted = [], [], set()
    for rate, dash in (("fpir", None), ("fnir", svg.DASHED)):
        values = _column(sweep, rate)
        if values is None:
            continue
        legend.append(svg.LegendEntry(rate.upper(), svg.COLORS["grey"], dash=dash))
        for name in order:
            # the sweep's end points sit at thresholds of +-inf (accept all / reject all): not drawable
            points = sorted((t, v) for t, v, g in zip(thresholds, values, groups)
                            if g == name and not _is_missing(t) and math.isfinite(t) and not _is_missing(v))
            if points:
                xs, ys = zip(*points)
                series.append(svg.Series(f"{rate.upper()} {name}", xs, ys, colors[name], width=2 if name == "all" else 1.2, dash=dash))
                plotted.add(name)
    if not series:
        return None  # rates all null (no known or no unknown queries): a note, not empty axes
    # groups as colour patches: a line sample would read as a line style (solid all = solid FPIR)
    legend += [svg.LegendEntry(name, colors[name], kind="patch") for name in order if name in plotted]
    every_x = [x for s in series for x in s.xs]
    lo, hi = min(every_x), max(every_x)
    vlines = []
    if threshold is not None:
        lo, hi = min(lo, threshold), max(hi, threshold)
        vlines.append(svg.VLine(threshold, svg.COLORS["grey"], svg.DOTTED, 1.2))
        legend.append(svg.LegendEntry(f"threshold {threshold:.4g}", svg.COLORS["grey"], dash=svg.DOTTED, width=1.2))
    return svg.data_uri(svg.line_chart(
        series, svg.Axes(title="Open-set error rates (FPIR solid, FNIR dashed)", xlabel="threshold on the rank-1 score",
                         ylabel="rate", xlim=svg.padded(lo, hi), ylim=(0, 1.02)),
        vlines=vlines, legend=legend, legend_at="below",
    ))


#: the DET plot's axes stop here: a rate below one in a million is beyond any sweep's resolution
_DET_FLOOR = 1e-6


def det_limits(values: list[float]) -> tuple[float, float]:
    """The range of a DET axis: from the power of ten at or below the smallest positive rate (at least
    :data:`_DET_FLOOR`, at most 0.1) to 1."""
    positive = [v for v in values if v > 0]
    low = min(positive) if positive else 0.1
    return max(_DET_FLOOR, min(0.1, 10.0 ** math.floor(math.log10(low) + 1e-9))), 1.0


def _plot_det(sweep: pa.Table, summary: pa.Table | None = None) -> str | None:
    """The DET curve of the threshold sweep: FNIR against FPIR, both on log axes, one line per group (the
    open-set and biometrics literature's plot, where a low FPIR can be read); the operating point at the
    run's threshold (the summary's ``all`` row) as a marker. Rates of 0 have no place on a log axis and are
    left out; None when no group has a point with both rates above 0."""
    if not {"threshold", "fpir", "fnir"} <= set(sweep.column_names):
        return None
    fpir, fnir = sweep.column("fpir").to_pylist(), sweep.column("fnir").to_pylist()
    groups = ["all" if g is None else str(g) for g in (_column(sweep, "group") or ["all"] * len(fpir))]
    order = _groups_in_order(groups)
    colors = _group_colors(order)
    series = []
    for name in order:
        points = sorted((float(a), float(b)) for a, b, g in zip(fpir, fnir, groups)
                        if g == name and not _is_missing(a) and not _is_missing(b) and a > 0 and b > 0)
        if points:
            xs, ys = zip(*points)
            series.append(svg.Series(name, xs, ys, colors[name], width=2 if name == "all" else 1.2))
    if not series:
        return None
    legend = [svg.LegendEntry(s.label, s.color, width=s.width) for s in series]
    rows = summary.to_pylist() if summary is not None and {"fpir", "fnir"} <= set(summary.column_names) else []
    here = next((r for r in rows if r.get("group") in ("all", None)), None)
    if here is not None and not _is_missing(here["fpir"]) and not _is_missing(here["fnir"]) \
            and here["fpir"] > 0 and here["fnir"] > 0:
        series.append(svg.Series("at the threshold", [here["fpir"]], [here["fnir"]], svg.COLORS["red"], width=0,
                                 markers=True))
        legend.append(svg.LegendEntry(f"at the threshold {_fmt(here.get('threshold'))}", svg.COLORS["red"], width=0,
                                      markers=True))
    xlim = det_limits([x for s in series for x in s.xs])
    ylim = det_limits([y for s in series for y in s.ys])
    return svg.data_uri(svg.line_chart(
        series, svg.Axes(title="DET: open-set errors across thresholds", xlabel="FPIR (unknown queries accepted, log scale)",
                         ylabel="FNIR (known queries missed, log scale)", xlim=xlim, ylim=ylim, xlog=True, ylog=True),
        legend=legend, legend_at="below",
    ))


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2330;background:#f6f7f9;line-height:1.4}
main{max-width:1240px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:1.5rem;margin:0 0 .4rem}
h2{font-size:1.15rem;margin:1.6rem 0 .5rem;border-bottom:1px solid #d5d9e0;padding-bottom:.2rem}
h3{font-size:.95rem;margin:1rem 0 .3rem;color:#444}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:.4rem 0;font-size:.9rem}
.meta dt{color:#666}.meta dd{margin:0;overflow-wrap:anywhere}
.warn{background:#fff4d6;border:1px solid #e8c66b;border-radius:4px;padding:.4rem .8rem;font-size:.9rem}
.warn ul{margin:.2rem 0;padding-left:1.2rem}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;background:#fff;font-size:.85rem;margin:.2rem 0 .6rem}
th,td{border:1px solid #dde1e7;padding:.25rem .55rem}
th{background:#eef1f5;font-weight:600;white-space:normal;overflow-wrap:break-word;vertical-align:bottom;max-width:9rem}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.txt{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.8rem;overflow-wrap:anywhere;max-width:32rem}
tbody tr:nth-child(even){background:#f9fafb}
.tables{display:flex;flex-wrap:wrap;gap:0 1.2rem;align-items:flex-start;max-width:100%}
.tables table{max-width:100%}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(480px,100%),1fr));gap:14px}
figure{margin:0;background:#fff;border:1px solid #dde1e7;border-radius:4px;padding:6px}
figure img{width:100%;height:auto;display:block}
figcaption{font-size:.8rem;color:#555;padding:.2rem .3rem}
.note{color:#666;font-style:italic;font-size:.9rem}
details{font-size:.85rem;margin:.3rem 0}
details pre{background:#fff;border:1px solid #dde1e7;padding:.5rem;overflow-x:auto;white-space:pre-wrap}
span.delta{color:#777;font-size:.75rem;margin-left:.3rem}
"""  # noqa: E501 - one CSS rule per line, as the page has always carried them


def _esc(value) -> str:
    """HTML-escaped text of any value."""
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        f"<h1>{_esc(title)}</h1>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _html_table(columns: list[str], rows: list[list], text_columns: Set[str] = frozenset(),
                labels: list[str] | None = None, scroll: bool = True) -> str:
    """An escaped HTML table; numbers right-aligned, ``text_columns`` in monospace; ``scroll`` wraps it in a box
    that scrolls sideways when it is still too wide (headers and long keys wrap first)."""
    labels = labels or [_label(c) for c in columns]
    head = "".join(f'<th title="{_esc(c)}">{_esc(lab)}</th>' for c, lab in zip(columns, labels))
    body = []
    for row in rows:
        cells = []
        for name, value in zip(columns, row):
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            css = "txt" if name in text_columns else ("num" if numeric else "")
            cells.append(f'<td class="{css}">{_esc(_fmt(value))}</td>' if css else f"<td>{_esc(_fmt(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f'<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(body) + "\n</tbody></table>"
    return f'<div class="scroll">{table}</div>' if scroll else table


def _table_rows(table: pa.Table, columns: list[str]) -> list[list]:
    """Row-major Python values of ``columns``."""
    data = [table.column(c).to_pylist() for c in columns]
    return [list(row) for row in zip(*data)] if data else []


def _figure(uri: str | None, caption: str, missing: str) -> str:
    """A ``<figure>`` with an inline image, or nothing when there is nothing to plot (``missing`` says why;
    an IR run has no rank-1 classes or CMC to draw, and an empty box per plot only says so louder)."""
    if uri is None:
        return ""
    return f'<figure><img alt="{_esc(caption)}" src="{uri}"><figcaption>{_esc(caption)}</figcaption></figure>'


def _dataset_and_protocol(run: dict) -> tuple[str | None, str | None]:
    """Dataset path and protocol from ``run.json``, wherever they are recorded."""
    dataset = run.get("dataset")
    recorded = run.get("options")
    options = recorded if isinstance(recorded, dict) else {}
    path = protocol = None
    if isinstance(dataset, dict):
        path = next((dataset[k] for k in ("path", "uri", "url", "root", "name") if dataset.get(k) is not None), None)
        protocol = dataset.get("protocol")
    elif dataset is not None:
        path = dataset
    protocol = protocol if protocol is not None else options.get("protocol", run.get("protocol"))
    return (None if path is None else str(path)), (None if protocol is None else str(protocol))


def _scalar_text(value) -> str:
    """Compact text of a run.json value (dicts and lists as JSON)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return _fmt(value)


def _run_header(run: dict) -> str:
    """Dataset, protocol, counts and warnings; options, timings, versions folded away."""
    run = run if isinstance(run, dict) else {}
    path, protocol = _dataset_and_protocol(run)
    items = [("dataset", path), ("protocol", protocol)]
    counts = run.get("counts")
    if isinstance(counts, dict) and counts:
        items.append(("counts", ", ".join(f"{k}: {_scalar_text(v)}" for k, v in counts.items())))
    elif counts is not None:
        items.append(("counts", _scalar_text(counts)))
    for key in ("created", "started", "finished"):
        if run.get(key) is not None:
            items.append((key, _scalar_text(run[key])))
    parts = ['<dl class="meta">' + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in items if v is not None)
             + "</dl>"]
    warnings = run.get("warnings")
    if warnings:
        warnings = warnings if isinstance(warnings, list) else [warnings]
        parts.append('<div class="warn"><strong>Warnings</strong><ul>'
                     + "".join(f"<li>{_esc(_scalar_text(w))}</li>" for w in warnings) + "</ul></div>")
    for key in ("options", "timings", "versions"):
        if run.get(key):
            text = json.dumps(run[key], indent=2, sort_keys=True, default=str)
            parts.append(f"<details><summary>{_esc(key)}</summary><pre>{_esc(text)}</pre></details>")
    return "\n".join(parts)


#: summary columns per HTML table (besides group): 5 numbers fit a 700-pixel window (Chromium, tests/test_report_pictures.py); side by side on a wide one
SUMMARY_COLUMNS = 5


def _family(name: str) -> str:
    """The metric a column is one cut-off of (``hit_at_5`` -> ``hit@k``), or the column itself."""
    column = registry.lookup(name)
    return column.metric.name if column is not None and column.k is not None else name


def summary_tables(section: list[str], width: int = SUMMARY_COLUMNS) -> list[list[str]]:
    """A section's columns in tables of at most ``width``, packed in order without splitting a family
    (:func:`_family`) unless the family alone is wider than ``width``."""
    families: list[list[str]] = []
    for name in section:
        if families and _family(families[-1][-1]) == _family(name):
            families[-1].append(name)
        else:
            families.append([name])
    tables: list[list[str]] = []
    for family in families:
        for start in range(0, len(family), width):
            piece = family[start:start + width]
            if tables and len(tables[-1]) + len(piece) <= width:
                tables[-1] += piece
            else:
                tables.append(list(piece))
    return tables


def _summary_html(summary: pa.Table) -> str:
    """The summary as one table per topic, one row per group."""
    if summary.num_rows == 0 or not summary.column_names:
        return '<p class="note">The summary is empty.</p>'
    columns = summary.column_names
    first = ["group"] if "group" in columns else []
    parts = []
    for name, section in _summary_sections(columns):
        # whole families a table (hit@1..hit@10 together), at most SUMMARY_COLUMNS numbers each, side by side in a
        # box that wraps: a narrow window puts the next table under, instead of clipping one wide table
        tables = [_html_table(first + cols, _table_rows(summary, first + cols), scroll=False)
                  for cols in summary_tables(section)]
        parts.append(f'<h3>{_esc(name)}</h3><div class="tables">' + "".join(tables) + "</div>")
    intervals = interval_rows(summary)
    if intervals:
        header, rows = intervals
        parts.append("<h3>Confidence intervals</h3>" + _html_table(
            ["group", "metric", "mean", "low", "high"], rows, text_columns={"metric"},
            labels=["group", "metric", "mean", f"{header} low", f"{header} high"]))
    return "\n".join(parts)


def interval_rows(summary: pa.Table, group: str | None = None) -> tuple[str, list[list]] | None:
    """(level text, rows [group, metric label, mean, low, high]) of every mean with ``_ci_low``/``_ci_high``
    columns (``--ci``), or None without them; ``group`` keeps one row of the summary."""
    columns = summary.column_names
    metrics = [c for c in registry.display_order(columns) if f"{c}_ci_low" in columns]
    if not metrics:
        return None
    rows = []
    groups = _column(summary, "group") or ["all"] * summary.num_rows
    for i, g in enumerate(groups):
        if group is not None and g != group:
            continue
        for c in metrics:
            rows.append([g, _label(c), summary.column(c)[i].as_py(), summary.column(f"{c}_ci_low")[i].as_py(),
                         summary.column(f"{c}_ci_high")[i].as_py()])
    return "interval", rows


def _threshold(summary: pa.Table) -> float | None:
    """The open-set threshold of the ``all`` row (or the first row), if any."""
    values = _column(summary, "threshold")
    if not values:
        return None
    groups = _column(summary, "group") or []
    row = groups.index("all") if "all" in groups else 0
    return None if _is_missing(values[row]) else float(values[row])


def _score_figures(per_query: pa.Table, threshold: float | None) -> list[str]:
    """The rank-1 score histograms: correct vs incorrect (when per_query has ``first_rank``), and known vs
    unknown (when there are unknown queries); a plot without data is left out, not shown as an empty box."""
    scores = _column(per_query, "top1_score")
    if scores is None:
        return []
    known = _known_mask(per_query)
    unknown = _unknown_mask(per_query)
    first = _column(per_query, "first_rank")
    figures = []
    if first is not None:  # without it every query would read as incorrect at rank 1
        correct = [s for s, k, f in zip(scores, known, first) if k and f == 1]
        wrong = [s for s, k, f in zip(scores, known, first) if k and f != 1]
        figures.append(_figure(
            _plot_histograms([("correct at rank 1", correct, svg.COLORS["green"]), ("incorrect at rank 1", wrong, svg.COLORS["red"])], "Rank-1 score, known queries", threshold),
            "Rank-1 scores of known queries whose rank-1 item is relevant (correct) or not (incorrect).",
            "No rank-1 scores of known queries to plot.",
        ))
    if unknown.any():
        known_scores = [s for s, k in zip(scores, known) if k]
        unknown_scores = [s for s, u in zip(scores, unknown) if u]
        figures.append(_figure(
            _plot_histograms([("known", known_scores, svg.COLORS["blue"]), ("unknown", unknown_scores, svg.COLORS["orange"])], "Rank-1 score, known vs unknown queries", threshold),
            "Rank-1 scores of known queries and of unknown (open-set) queries, which have no relevant item.",
            "No rank-1 scores to plot.",
        ))
    return figures


def _worst_html(per_query: pa.Table, n: int) -> str:
    """The worst-queries table, or a note when there are no known queries."""
    if "ap" not in per_query.column_names and per_query.num_rows:
        return f'<p class="note">{_NO_AP}</p>'
    worst = worst_queries(per_query, n)
    n_evaluated = int(_evaluated_mask(per_query).sum())  # as the summary's n_evaluated counts them
    if worst.num_rows == 0:
        return '<p class="note">No known queries (with at least one relevant item) to rank.</p>'
    columns = worst.column_names
    intro = (f'<p class="note">The {worst.num_rows} lowest-AP of {n_evaluated} evaluated queries; '
             "an empty first correct rank means no relevant item was ranked.</p>")
    return intro + _html_table(columns, _table_rows(worst, columns), text_columns={"key", "top1_key"})


def render_report_html(
    per_query: pa.Table,
    summary: pa.Table,
    cmc: pa.Table,
    run: dict,
    sweep: pa.Table | None = None,
    title: str | None = None,
    n_worst: int = N_WORST,
    cmc_scale: str = "auto",
) -> str:
    """One self-contained HTML page for a report folder.

    Sections: a header from ``run.json`` (dataset, protocol, counts, warnings),
    the summary per group, the CMC curve, rank-1 score histograms (correct vs
    incorrect rank-1 match, one panel each; known vs unknown queries when there
    are unknown ones), the FPIR/FNIR threshold sweep and its DET curve (log
    axes) when ``sweep`` is given, and the ``n_worst`` worst queries (with
    identity, camera, AP, the best relevant item's rank and score). A plot
    without data is left out (one note when none is left); empty tables give
    a note. ``cmc_scale``: ``"auto"`` (rank k on a log axis beyond k = 100),
    ``"linear"`` or ``"log"``.
    """
    run = run if isinstance(run, dict) else {}
    if title is None:
        path, _ = _dataset_and_protocol(run)
        title = f"Retrieval evaluation: {path}" if path else "Retrieval evaluation"
    threshold = _threshold(summary)
    cmc_caption = "CMC: fraction of known queries with a relevant item within the top k, per group."
    figures = [_figure(_plot_cmc(cmc, cmc_scale), cmc_caption, "No CMC data.")]
    figures += _score_figures(per_query, threshold)
    if sweep is not None:
        figures.append(_figure(_plot_sweep(sweep, threshold),
                               "Open-set error rates against the threshold: FPIR (unknown queries accepted) "
                               "and FNIR (known queries rejected or wrong).",
                               "The threshold sweep is empty."))
        figures.append(_figure(_plot_det(sweep, summary),
                               "DET curve: FNIR against FPIR over the thresholds of the sweep, both on log axes "
                               "(rates of 0 are off a log axis and left out); the marker is the run's threshold.",
                               "No threshold with both rates above 0."))
    figures = [f for f in figures if f]
    curves = ('<div class="grid">' + "\n".join(figures) + "</div>" if figures
              else '<p class="note">Nothing to plot: no known query with a CMC point or a rank-1 score.</p>')
    body = "\n".join([
        _run_header(run),
        "<h2>Summary</h2>", _summary_html(summary),
        "<h2>Curves</h2>", curves,
        "<h2>Worst queries</h2>", _worst_html(per_query, n_worst),
    ])
    return _page(title, body)


# --------------------------------------------------------------------------- trend page


def _trend_metrics(history: pa.Table, metrics: list[str] | None) -> list[str]:
    """The metrics to plot: the requested ones, else every float column."""
    if metrics is not None:
        missing = [m for m in metrics if m not in history.column_names]
        if missing:
            raise OptionError("history", f"no column(s) {', '.join(missing)}; "
                             f"columns are {', '.join(history.column_names)}")
        return list(metrics)
    floats = [f.name for f in history.schema if f.name not in _TREND_KEYS and pa.types.is_floating(f.type)]
    preferred = [m for m in _PREFERRED_METRICS if m in floats]
    return preferred + sorted((m for m in floats if m not in preferred), key=_k_sort_key)


def _parse_dates(values: list) -> list[_dt.date]:
    """``run_date`` strings (YYYY-MM-DD) as dates; a bad one is an input error."""
    dates = []
    for value in values:
        try:
            dates.append(value if isinstance(value, _dt.date) else _dt.date.fromisoformat(str(value)[:10]))
        except ValueError:
            raise OptionError("history", f"run_date {value!r} is not YYYY-MM-DD") from None
    return dates


def _trend_rows(history: pa.Table) -> list[dict]:
    """Rows of the ``all`` group (every row without a group column), oldest first."""
    if "run_date" not in history.column_names or "evaluation" not in history.column_names:
        raise OptionError("history", f"needs run_date and evaluation columns, has {', '.join(history.column_names)}")
    rows = history.to_pylist()
    if "group" in history.column_names:
        rows = [r for r in rows if r.get("group") == "all"]
    for row, date in zip(rows, _parse_dates([r["run_date"] for r in rows])):
        row["_date"] = date
    return sorted(rows, key=lambda r: r["_date"])  # stable: same-day reruns keep table order


def _plot_trend(rows: list[dict], metric: str, evaluations: list[str]) -> str:
    """One metric over time, one line per evaluation (x: days, labelled as dates), as an SVG data URI."""
    colors = _group_colors(evaluations)
    origin = min(r["_date"] for r in rows)
    series = []
    for name in evaluations:
        points = [((r["_date"] - origin).days, math.nan if _is_missing(r.get(metric)) else float(r[metric]))
                  for r in rows if str(r["evaluation"]) == name]
        if points:
            xs, ys = zip(*points)
            series.append(svg.Series(name, xs, ys, colors[name] if name != "all" else svg.COLORS["black"],
                                     markers=True))
    span = max(x for s_ in series for x in s_.xs) if series else 0
    values = [y for s_ in series for y in s_.ys if math.isfinite(y)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    legend = [svg.LegendEntry(s_.label, s_.color, markers=True) for s_ in series]
    return svg.data_uri(svg.line_chart(
        series, svg.Axes(title=f"{_label(metric)} over time", xlabel="run date", ylabel=_label(metric),
                         xlim=(-0.5, span + 0.5), ylim=svg.padded(lo, hi if hi > lo else lo + 1e-3, 0.08), xinteger=True,
                         xformat=lambda d: (origin + _dt.timedelta(days=int(round(d)))).strftime("%b %d")),
        legend=legend, legend_at="below"))


def _latest_table(rows: list[dict], metrics: list[str], evaluations: list[str]) -> str:
    """Latest value per evaluation, with the change since its previous run."""
    head = "<th>evaluation</th><th>run date</th>" + "".join(f"<th>{_esc(_label(m))}</th>" for m in metrics)
    body = []
    for name in evaluations:
        runs = [r for r in rows if str(r["evaluation"]) == name]
        latest, previous = runs[-1], (runs[-2] if len(runs) > 1 else None)
        cells = [f'<td class="txt">{_esc(name)}</td>', f"<td>{_esc(latest['_date'].isoformat())}</td>"]
        for metric in metrics:
            value = latest.get(metric)
            delta = ""
            if previous is not None and isinstance(value, (int, float)) \
                    and isinstance(previous.get(metric), (int, float)):
                change = value - previous[metric]
                if math.isfinite(change):
                    delta = f'<span class="delta">({change:+.4f})</span>'
            cells.append(f'<td class="num">{_esc(_fmt(value))}{delta}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>' + "".join(body)
            + "</tbody></table></div>")


def render_trend_html(history: pa.Table, metrics: list[str] | None = None,
                      title: str = "Nightly evaluation trends") -> str:
    """A self-contained page of metrics over nightly runs.

    ``history`` has ``run_date`` (YYYY-MM-DD), ``evaluation``, ``group`` and
    metric columns; only ``group == "all"`` rows are used. Each metric (by
    default every float column) gets one inline SVG chart with one line per
    evaluation; a table gives each evaluation's latest values and the change
    since its previous run.
    """
    metrics = _trend_metrics(history, metrics)
    rows = _trend_rows(history)
    if not rows:
        return _page(title, '<p class="note">No runs of group "all" in the history.</p>')
    evaluations = list(dict.fromkeys(str(r["evaluation"]) for r in rows))
    first, last = rows[0]["_date"].isoformat(), rows[-1]["_date"].isoformat()
    intro = (f'<p class="note">{len(evaluations)} evaluation(s), {len(rows)} run(s) '
             f'from {_esc(first)} to {_esc(last)}; group "all".</p>')
    figures = [_figure(_plot_trend(rows, m, evaluations), f"{_label(m)} per run date, one line per evaluation.", "")
               for m in metrics]
    body = "\n".join([intro, "<h2>Latest values</h2>", _latest_table(rows, metrics, evaluations),
                      "<h2>Trends</h2>", '<div class="grid">' + "\n".join(figures) + "</div>"])
    return _page(title, body)


# --------------------------------------------------------------------------- terminal


def _truncate(text: str, width: int, keep_end: bool = False) -> str:
    """``text`` cut to ``width`` characters with an ellipsis (at the start when ``keep_end``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    return "…" + text[-(width - 1):] if keep_end else text[: width - 1] + "…"


def _text_table(headers: list[str], rows: list[list[str]], numeric: list[bool]) -> list[str]:
    """Aligned plain-text table lines: numbers right-aligned, text left-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return [line(headers), rule] + [line(r) for r in rows]


def _chunk_width(widths: list[int]) -> int:
    """Width of columns set side by side with 2-space gaps."""
    return sum(widths) + 2 * max(len(widths) - 1, 0)


def _split_columns(widths: list[int], budget: int) -> list[list[int]]:
    """Column indices in the fewest chunks that fit ``budget``, balanced in size.

    Greedy packing finds the number of chunks; columns are then spread evenly
    over that many chunks when that still fits (no lonely last column).
    """
    greedy: list[list[int]] = []
    current: list[int] = []
    for i, w in enumerate(widths):
        if current and _chunk_width([widths[j] for j in current] + [w]) > budget:
            greedy.append(current)
            current = []
        current.append(i)
    if current:
        greedy.append(current)
    count = len(greedy)
    if count > 1:
        size, extra = divmod(len(widths), count)
        bounds = np.cumsum([0] + [size + (i < extra) for i in range(count)])
        even = [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]
        if all(_chunk_width([widths[j] for j in chunk]) <= budget for chunk in even):
            return even
    return greedy


def _terminal_summary(summary: pa.Table, width: int, every_metric: bool = False) -> list[str]:
    """The summary as stacked tables that fit ``width``, each led by the group column: the terminal's short
    set of metrics, or, with ``every_metric`` (the run named its metrics), every metric column it has.

    Ranking metrics and open-set counts/rates start separate tables: the
    known queries' counts with FNIR, then the unknown queries' with FPIR,
    each under a line with its rule (a report without the split counts: its
    TP/FP/FN/TN and rates). A block still too wide is split greedily.
    """
    columns = summary.column_names
    blocks: list[tuple[str | None, list[str]]] = [
        (None, [c for c in _COUNTS if c in columns] + registry.display_order(columns, terminal=not every_metric))]
    if any(c in columns for c in openset.SPLIT_COUNTS):
        blocks += [(_truncate(rule, width), [c for c in block if c in columns])
                   for rule, block in _TERMINAL_OPEN_SET_BLOCKS]
    else:
        blocks.append((None, [c for c in _TERMINAL_OPEN_SET if c in columns]))
    groups = [_truncate("all" if g is None else str(g), max(width // 3, 8))
              for g in (_column(summary, "group") or ["all"] * summary.num_rows)]
    group_width = max([len("group")] + [len(g) for g in groups])
    lines: list[str] = []
    for caption, block in blocks:
        cells = {c: [_fmt(v, "-") for v in summary.column(c).to_pylist()] for c in block}
        widths = [max([len(_label(c))] + [len(v) for v in cells[c]]) for c in block]
        for j, chunk in enumerate(_split_columns(widths, max(width - group_width - 2, 1))):
            cols = [block[i] for i in chunk]
            rows = [[g] + [cells[c][r] for c in cols] for r, g in enumerate(groups)]
            table = _text_table(["group"] + [_label(c) for c in cols], rows, [False] + [True] * len(cols))
            lines += ([""] if lines else []) + ([caption] if caption and j == 0 else []) + table
    return lines or _text_table(["group"], [[g] for g in groups], [False])


def _fit_widths(natural: list[int], available: int, minimum: int = 8) -> list[int]:
    """Shrink the widest of ``natural`` widths until they sum to ``available`` (none below ``minimum``)."""
    widths = list(natural)
    while sum(widths) > available:
        widest = max(range(len(widths)), key=widths.__getitem__)
        if widths[widest] <= minimum:
            break
        widths[widest] -= 1
    return widths


def _terminal_worst(per_query: pa.Table, n: int, width: int) -> list[str]:
    """The worst queries as a text table; key columns share the width left by numbers."""
    if "ap" not in per_query.column_names and per_query.num_rows:
        return [_NO_AP]
    worst = worst_queries(per_query, n)
    n_evaluated = int(_evaluated_mask(per_query).sum())  # as the summary's n_evaluated counts them
    if worst.num_rows == 0:
        return ["No known queries to rank."]
    # identity and camera are the report page's: in 80 columns they would leave the keys a few characters
    columns = [c for c in worst.column_names if c not in ("label", "cam")]
    labels = [_TERMINAL_LABELS.get(c, _label(c)) for c in columns]
    cells = {c: [_fmt(v, "-") for v in worst.column(c).to_pylist()] for c in columns}
    natural = {c: max([len(lab)] + [len(v) for v in cells[c]]) for c, lab in zip(columns, labels)}
    text_cols = [c for c in columns if c in ("key", "top1_key")]
    fixed = sum(natural[c] for c in columns if c not in text_cols) + 2 * (len(columns) - 1)
    for c, w in zip(text_cols, _fit_widths([natural[c] for c in text_cols], width - fixed)):
        cells[c] = [_truncate(v, w, keep_end=True) for v in cells[c]]
    rows = [[cells[c][r] for c in columns] for r in range(worst.num_rows)]
    notes = [f"{_TERMINAL_LABELS[c]} = {_label(c)}" for c in columns if c in _TERMINAL_LABELS]
    lines = [f"Worst {worst.num_rows} of {n_evaluated} evaluated queries (lowest AP first)"]
    if notes:
        lines.append(_truncate("(" + "; ".join(notes) + ")", width))
    return lines + [""] + _text_table(labels, rows, [c not in text_cols for c in columns])


def asked_metrics(run: Mapping | None) -> bool:
    """Whether the run (its run.json record) named the metrics to compute, or ran under --ties average (whose
    default set is the few metrics defined there): then its summary holds just those, and the terminal shows
    every one (else the default set's summary, of which the terminal shows the short set)."""
    options = (run or {}).get("options")
    return isinstance(options, Mapping) and (bool(options.get("metrics")) or options.get("ties") == "average")


def _summary_name(label: str, summary: pa.Table) -> str:
    """The summary column whose display label is ``label``."""
    return next((c for c in summary.column_names if _label(c) == label), label)


def format_terminal(summary: pa.Table, per_query: pa.Table | None = None, n_worst: int = 10, width: int = 100,
                    run: Mapping | None = None) -> str:
    """Plain text for ``evalcore evaluate``, ``evalcore show`` and ``evalcore demo``.

    An aligned summary table (one row per group: counts, mAP, mINP, MRR,
    hit@k and the open-set counts and rates when present; every metric asked
    for when the run's options (run.json) name its metrics), split into stacked
    tables when wider than ``width``, then the ``n_worst`` worst queries with
    long keys shortened from the left so lines stay within ``width``.
    """
    every_metric = asked_metrics(run)
    lines = ["Summary", ""]
    if summary.num_rows == 0:
        lines.append("(empty summary)")
    else:
        lines += _terminal_summary(summary, width, every_metric)
        intervals = interval_rows(summary, "all")
        if intervals:
            shown = [r for r in intervals[1]
                     if registry.display_order([_summary_name(r[1], summary)], terminal=not every_metric)]
            lines += ["", "Bootstrap intervals (group all; run.json records level, resamples, seed)", ""]
            lines += _text_table(["metric", "mean", "low", "high"],
                                 [[r[1], *(_fmt(v, "-") for v in r[2:])] for r in shown], [False, True, True, True])
    if per_query is not None and n_worst > 0:
        lines += [""] + _terminal_worst(per_query, n_worst, width)
    return "\n".join(lines) + "\n"
