"""What ``evalcore compare`` shows (README, Compare): the terminal table, the LaTeX table and compare.html."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from evalcore.core import registry
from evalcore.core.comparison import Comparison, MeanTable, Row, best_cells, mean_table
from evalcore.core.intervals import EXACT_MAX, marks
from evalcore.render import pages, svg

#: the per-query scatter draws at most this many queries (evenly spaced in key order)
SCATTER_POINTS = 5000


def _label(metric: str) -> str:
    return registry.label(metric) or metric


def _f(value: float, digits: int = 4, sign: bool = False) -> str:
    if value is None or not value == value:
        return "–"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _p(value: float) -> str:
    if value is None or not value == value:
        return "–"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _better(row: Row) -> str:
    """Which way the difference goes for the run, in the metric's own direction."""
    d = row.result.diff
    if not d == d or d == 0:
        return ""
    lower = registry.direction(row.metric) == "lower"
    return "better" if (d > 0) != lower else "worse"


def terminal_rows(comparison: Comparison, group: str | None = "all") -> list[Row]:
    """The rows shown: every run's rows of one query/group row (``all``; None: every row)."""
    return [r for r in comparison.rows if group is None or r.group == group]


def format_terminal(comparison: Comparison, group: str | None = "all") -> str:
    """The comparison as a text table; marks from the Holm-adjusted p-value: * < 0.05, ** < 0.01, *** < 0.001."""
    level = f"{100 * comparison.method.level:g}%"
    headers = ["run", "metric", "baseline", "run value", "diff", f"{level} interval", "p rand", "p t-test",
               "p Holm", "", "W/T/L"]
    lines = []
    for r in terminal_rows(comparison, group):
        x = r.result
        name = r.run if group is not None else f"{r.run} [{r.group}]"
        lines.append([name, _label(r.metric), _f(x.mean_baseline), _f(x.mean_run), _f(x.diff, sign=True),
                      f"[{_f(x.ci_low, sign=True)}, {_f(x.ci_high, sign=True)}]", _p(x.p_randomization),
                      _p(x.p_ttest), _p(r.p_holm), marks(r.p_holm), f"{x.wins}/{x.ties}/{x.losses}"])
    widths = [max(len(h), *(len(row[i]) for row in lines)) if lines else len(h) for i, h in enumerate(headers)]
    text = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    text += ["  ".join(c.ljust(w) if i < 2 or i == 9 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in lines]
    n = sorted({r.result.n for r in terminal_rows(comparison, group)})
    text.append(f"baseline {comparison.runs[0]}; diff = run − baseline on {', '.join(map(str, n))} paired queries; "
                f"{comparison.method.resamples} bootstrap resamples, {comparison.method.permutations} sign flips "
                f"(exact up to 20 queries), seed {comparison.method.seed}; * p Holm < 0.05, ** < 0.01, *** < 0.001")
    return "\n".join(text)


def _tex(text: str) -> str:
    """``text`` as LaTeX prints it: every special character escaped (^ and ~ too: a run named a^b is not an
    exponent), control characters (a line break would end the row) as spaces."""
    text = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text)
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"),
                 ("$", r"\$"), ("{", r"\{"), ("}", r"\}"), ("^", r"\textasciicircum{}"), ("~", r"\textasciitilde{}")):
        text = text.replace(a, b) if a != "\\" else text.replace(a, "\0")
    return text.replace("\0", r"\textbackslash{}")


#: the packages the LaTeX table needs, named in its first line
LATEX_PACKAGES = ("booktabs",)
#: what the arrow after a metric's label says
_ARROWS = {"higher": r" $\uparrow$", "lower": r" $\downarrow$"}


def _latex_caption(comparison: Comparison, table: MeanTable, group: str) -> str:
    """What the table shows, in its caption: the runs, the metrics' means, the test behind the marks, bold,
    and the interval's level and resamples (those intervals are in comparison.parquet)."""
    m = comparison.method
    base, others = _tex(table.runs[0]), ", ".join(_tex(r) for r in table.runs[1:])
    n = "no" if not table.n else f"{table.n[0]}" if len(table.n) == 1 else f"{table.n[0]}--{table.n[-1]}"
    where = "" if group == "all" else f" of group {_tex(group)}"
    directions = {registry.direction(x) for x in table.metrics}
    arrows = ", ".join(f"{_ARROWS[d].strip()} {d} is better" for d in ("higher", "lower") if d in directions)
    text = (f"Mean of each metric over the {n} queries{where} that {others} and the baseline {base} share. "
            f"Marks: Holm-adjusted two-sided sign-flip test against {base} ({m.permutations} sign flips, every "
            f"flip up to {EXACT_MAX} queries): * $p<0.05$, ** $p<0.01$, *** $p<0.001$. "
            + (f"Bold: the best value of each metric ({arrows}). " if arrows else "") +
            f"{100 * m.level:g}\\% bootstrap intervals of the differences ({m.resamples} resamples, seed {m.seed}) "
            "are in comparison.parquet.")
    if table.baseline_varies:
        text += f" {base}'s means: over the queries it shares with {_tex(table.runs[1])}."
    return text


def format_latex(comparison: Comparison, group: str = "all") -> str:
    """A LaTeX table (booktabs, named in its first line) of the ``group`` rows: a float with a caption, one line
    per run (the baseline first), one column per metric, the mean with its significance marks (Holm) as
    superscript, the best mean of each column (by the metric's direction, as shown) in bold."""
    table = mean_table(comparison, group)
    best = best_cells(table)
    head = " & ".join(["Run", *(_tex(_label(m)) + _ARROWS.get(registry.direction(m) or "", "")
                               for m in table.metrics)])
    body = []
    for i, run in enumerate(table.runs):
        cells = [_tex(run)]
        for j in range(len(table.metrics)):
            value, mark = _f(table.means[i, j]), marks(table.p_holm[i, j])
            cells.append((rf"\textbf{{{value}}}" if best[i, j] else value) + (f"$^{{{mark}}}$" if mark else ""))
        body.append(" & ".join(cells) + r" \\")
    return "\n".join([
        *(rf"% needs \usepackage{{{p}}}" for p in LATEX_PACKAGES),
        "% written by evalcore compare",
        r"\begin{table}[t]", r"\centering", rf"\caption{{{_latex_caption(comparison, table, group)}}}",
        r"\label{tab:evalcore-compare}",
        r"\begin{tabular}{l" + "r" * len(table.metrics) + "}", r"\toprule", head + r" \\", r"\midrule", *body,
        r"\bottomrule", r"\end{tabular}", r"\end{table}", ""])


# --------------------------------------------------------------------------- compare.html


#: the interval column's drawing: width, height of a row's bar, room each side for the scale's end labels
BAR_WIDTH, BAR_HEIGHT, BAR_PAD = 220, 18, 18


def interval_axis(values) -> tuple[float, list[float]]:
    """The interval column's scale of one table: symmetric about zero, ±S with S the first multiple of a nice
    step ({1, 2, 5} x 10^k, at most 5 ticks) at or past the largest |value|, and its ticks -S, ..., 0, ..., S.
    All zero (a run against itself): ±0.01, so the axis still reads as one."""
    finite = [abs(v) for v in values if v == v and abs(v) != float("inf")]
    largest = max(finite, default=0.0)
    if largest == 0:
        return 0.01, [-0.01, -0.005, 0.0, 0.005, 0.01]
    step = svg.nice_step(2 * largest, max_ticks=5)
    span = float(f"{np.ceil(largest / step - 1e-9) * step:.12g}")
    return span, svg.linear_ticks(-span, span, max_ticks=5)


def _bar_x(value: float, span: float) -> float:
    """Pixel of a difference on the interval column's axis: 0 at the middle, ±span at the padded ends."""
    return BAR_WIDTH / 2 + value / span * (BAR_WIDTH / 2 - BAR_PAD)


def _interval_scale(span: float, ticks: list[float]) -> str:
    """An inline SVG: the axis the table's bars are drawn on, each tick labelled with its difference (run −
    baseline), zero marked as in every bar (dashed, its label bold)."""
    labels = svg.tick_labels(ticks)
    parts = [f'<line x1="{BAR_PAD}" y1="3" x2="{BAR_WIDTH - BAR_PAD}" y2="3" stroke="#555"/>']
    for t, text in zip(ticks, labels):
        x = _bar_x(t, span)
        if t == 0:  # zero as in every bar: dashed, and longer and bold here
            parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="12" stroke="#000" stroke-dasharray="3,2"/>'
                         f'<text x="{x:.1f}" y="21" font-size="9" text-anchor="middle" font-weight="bold">0</text>')
            continue
        shown = ("+" if t > 0 else "−") + text.lstrip("-")
        parts.append(f'<line x1="{x:.1f}" y1="3" x2="{x:.1f}" y2="7" stroke="#555"/>'
                     f'<text x="{x:.1f}" y="21" font-size="9" text-anchor="middle">{shown}</text>')
    return (f'<svg class="ci-scale" width="{BAR_WIDTH}" height="24" viewBox="0 0 {BAR_WIDTH} 24" role="img" '
            f'aria-label="scale of the interval bars: run − baseline from −{labels[-1]} to +{labels[-1]}">'
            + "".join(parts) + "</svg>")


def _interval_bar(row: Row, span: float) -> str:
    """An inline SVG: the interval as a bar around the difference, zero dashed, on the table's ±span scale."""
    r = row.result
    if r.ci_low == r.ci_low and r.ci_high == r.ci_high:
        good = _better(row) == "better"
        color = "#2ca02c" if row.p_holm < 0.05 and good else "#d62728" if row.p_holm < 0.05 else "#7f7f7f"
        bar = (f'<line x1="{_bar_x(r.ci_low, span):.1f}" y1="9" x2="{_bar_x(r.ci_high, span):.1f}" y2="9" '
               f'stroke="{color}" stroke-width="4"/><circle cx="{_bar_x(r.diff, span):.1f}" cy="9" r="3.5" '
               f'fill="{color}"/>')
    else:
        bar = ""
    return (f'<svg class="ci" width="{BAR_WIDTH}" height="{BAR_HEIGHT}" viewBox="0 0 {BAR_WIDTH} {BAR_HEIGHT}">'
            f'<line x1="{BAR_WIDTH / 2}" y1="0" x2="{BAR_WIDTH / 2}" y2="{BAR_HEIGHT}" stroke="#999" '
            f'stroke-dasharray="3,2"/>{bar}</svg>')


def _table_html(comparison: Comparison) -> str:
    rows = comparison.rows
    parts = []
    level = f"{100 * comparison.method.level:g}%"
    for run in comparison.runs[1:]:
        for group in dict.fromkeys(r.group for r in rows if r.run == run):
            chosen = [r for r in rows if r.run == run and r.group == group]
            span, ticks = interval_axis([v for r in chosen
                                         for v in (r.result.ci_low, r.result.ci_high, r.result.diff)])
            body = []
            for r in chosen:
                x = r.result
                body.append(
                    f"<tr><td>{pages._esc(_label(r.metric))}</td><td class=num>{_f(x.mean_baseline)}</td>"
                    f"<td class=num>{_f(x.mean_run)}</td><td class=num>{_f(x.diff, sign=True)}</td>"
                    f"<td class=num>[{_f(x.ci_low, sign=True)}, {_f(x.ci_high, sign=True)}]</td>"
                    f"<td>{_interval_bar(r, span)}</td><td class=num>{_p(x.p_randomization)}</td>"
                    f"<td class=num>{_p(x.p_ttest)}</td><td class=num>{_p(r.p_holm)} {marks(r.p_holm)}</td>"
                    f"<td class=num>{x.wins}/{x.ties}/{x.losses}</td></tr>")
            n = chosen[0].result.n if chosen else 0
            parts.append(
                f"<h3>{pages._esc(run)} vs {pages._esc(comparison.runs[0])}: {pages._esc(group)} ({n} queries)</h3>"
                '<div class="scroll"><table><thead><tr><th>metric</th><th>baseline</th><th>run</th><th>diff</th>'
                f"<th>{level} interval</th><th>{level} interval of run − baseline (dot: diff)<br>"
                f"{_interval_scale(span, ticks)}</th><th>p rand</th><th>p t-test</th>"
                "<th>p Holm</th><th>W/T/L</th></tr></thead><tbody>" + "".join(body) + "</tbody></table></div>")
    return "\n".join(parts)


def _scatter(diff: pa.Table, run: str, column: str) -> str | None:
    """Per-query scatter of a metric of the baseline (x) against the run (y), the diagonal dashed."""
    sel = np.asarray(diff.column("run").to_pylist(), dtype=object) == run
    if f"{column}_baseline" not in diff.column_names or not sel.any():
        return None
    xs = diff.column(f"{column}_baseline").to_numpy(zero_copy_only=False)[sel]
    ys = diff.column(f"{column}_run").to_numpy(zero_copy_only=False)[sel]
    if len(xs) > SCATTER_POINTS:  # evenly spaced queries: a page of 100,000 circles is megabytes, not clearer
        keep = np.linspace(0, len(xs) - 1, SCATTER_POINTS).round().astype(np.int64)
        xs, ys = xs[keep], ys[keep]
    lo = float(np.nanmin(np.concatenate([xs, ys]))) if len(xs) else 0.0
    hi = float(np.nanmax(np.concatenate([xs, ys]))) if len(xs) else 1.0
    lo, hi = svg.padded(lo, hi if hi > lo else lo + 1)
    label = registry.label(column) or column
    return svg.scatter_chart(xs, ys, title=f"{label} per query", xlabel=f"baseline {label}",
                             ylabel=f"{run} {label}", lim=(lo, hi))


def _extremes_html(diff: pa.Table, run: str, column: str, n: int = 10) -> str:
    """The queries the run lost and gained most on ``column``, with their keys and rank-1 keys."""
    sel = np.flatnonzero(np.asarray(diff.column("run").to_pylist(), dtype=object) == run)
    if f"{column}_diff" not in diff.column_names or not len(sel):
        return ""
    d = diff.column(f"{column}_diff").to_numpy(zero_copy_only=False)[sel]
    keys = diff.column("key").to_pylist()
    t_a, t_b = diff.column("top1_key_baseline").to_pylist(), diff.column("top1_key_run").to_pylist()
    a, b = diff.column(f"{column}_baseline").to_pylist(), diff.column(f"{column}_run").to_pylist()
    order = np.argsort(d, kind="stable")
    label = registry.label(column) or column
    out = []
    for title, picks in ((f"most lost ({label})", order[:n]), (f"most gained ({label})", order[::-1][:n])):
        rows = [[keys[sel[i]], a[sel[i]], b[sel[i]], float(d[i]), t_a[sel[i]], t_b[sel[i]]]
                for i in picks if d[i] == d[i] and d[i] != 0]
        table = pages._html_table(["key", "baseline", "run", "diff", "top1_key_baseline", "top1_key_run"], rows,
                                  text_columns={"key", "top1_key_baseline", "top1_key_run"},
                                  labels=["query key", "baseline", run, "diff", "rank-1 key (baseline)",
                                          f"rank-1 key ({run})"]) if rows else '<p class="note">none</p>'
        out.append(f"<h3>{pages._esc(title)}</h3>{table}")
    return "\n".join(out)


def _cmc_chart(bands: pa.Table | None) -> str | None:
    """CMC of every run (group all) with its interval band; k on a log axis so the rise shows."""
    if bands is None or not bands.num_rows:
        return None
    runs = list(dict.fromkeys(bands.column("run").to_pylist()))
    colors = svg.palette(len(runs))
    series, entries, fills = [], [], []
    lows = []
    ks = np.asarray(bands.column("k").to_pylist(), float)
    names = np.asarray(bands.column("run").to_pylist(), dtype=object)
    for i, run in enumerate(runs):
        sel = names == run
        k = ks[sel]
        cmc = bands.column("cmc").to_numpy(zero_copy_only=False)[sel]
        low = bands.column("ci_low").to_numpy(zero_copy_only=False)[sel]
        high = bands.column("ci_high").to_numpy(zero_copy_only=False)[sel]
        lows.append(np.nanmin(low) if np.isfinite(low).any() else np.nanmin(cmc))
        series.append(svg.Series(run, k, cmc, colors[i % len(colors)], width=2))
        fills.append(svg.Band(run, k, low, high, colors[i % len(colors)]))
        entries.append(svg.LegendEntry(f"{run} (band: interval)", colors[i % len(colors)]))
    lo = max(0.0, float(np.nanmin(lows)) - 0.02)
    return svg.line_chart(series, svg.Axes(title="CMC with bootstrap bands", xlabel="k (log scale)", ylabel="CMC",
                                           xlim=(1, max(2.0, float(ks.max()))), ylim=(lo, 1.0), xlog=True),
                          legend=entries, legend_at="below", bands=fills)


def render_compare_html(comparison: Comparison, record: dict, cmc_bands: pa.Table | None = None) -> str:
    """compare.html: the table with interval bars, per run the AP scatter and the most lost and gained
    queries, and the CMC of every run with its band."""
    warn = "".join(f'<p class="note">warning: {pages._esc(w)}</p>' for w in comparison.warnings)
    m = comparison.method
    head = (f"<p>baseline <b>{pages._esc(comparison.runs[0])}</b>; runs "
            f"{', '.join(pages._esc(r) for r in comparison.runs[1:])}. diff = run − baseline per paired query; "
            f"{100 * m.level:g}% percentile bootstrap interval over {m.resamples} resamples; two-sided sign-flip "
            f"test over {m.permutations} flips (every flip up to 20 queries); paired t-test; Holm over all "
            f"{len(comparison.rows)} rows; seed {m.seed}. Bars: green better, red worse (Holm p &lt; 0.05), "
            "grey not significant.</p>")
    body = [head, warn, "<h2>Differences</h2>", _table_html(comparison)]
    column = next((c for c in ("ap", "ndcg_at_10", "rr") if f"{c}_diff" in comparison.per_query_diff.column_names),
                  None)
    if column is None:
        column = next((c[:-len("_diff")] for c in comparison.per_query_diff.column_names if c.endswith("_diff")), None)
    for run in comparison.runs[1:]:
        if column is None:
            break
        body.append(f"<h2>{pages._esc(run)} per query</h2>")
        chart = _scatter(comparison.per_query_diff, run, column)
        shown = sum(1 for r in comparison.rows if r.run == run and r.group == "all" and r.result.n > SCATTER_POINTS)
        body.append(pages._figure(svg.data_uri(chart) if chart else None,
                                  f"{column}: baseline vs {run}, one point per query"
                                  + (f" ({SCATTER_POINTS} evenly spaced queries shown)" if shown else ""),
                                  "no paired queries"))
        body.append(_extremes_html(comparison.per_query_diff, run, column))
    chart = _cmc_chart(cmc_bands)
    if chart:
        body += ["<h2>CMC</h2>", pages._figure(svg.data_uri(chart), "CMC of every run, band: the bootstrap interval",
                                               "")]
    return pages._page(f"evalcore compare: {' vs '.join(comparison.runs)}", "\n".join(body))
