"""Tests of evalcore.render.pages: HTML report, trend page, terminal text, report loading."""
from __future__ import annotations

import base64
import html
import math
import re
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pyarrow as pa
import pytest

import evalcore
from evalcore.errors import InputError
from evalcore.render.pages import (
    format_terminal,
    render_report_html,
    render_trend_html,
    worst_queries,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG_URI = "data:image/svg+xml;base64,"
SVG = "{http://www.w3.org/2000/svg}"
IMG = re.compile(r'<img alt="([^"]*)" src="([^"]*)"')
SCRIPT_KEY = "<script>alert(1)</script>.jpg"
UNKNOWN = {3, 11, 19, 27}
GROUPS = ("day", "night")
KS = (1, 5, 10)


def _ap(i: int) -> float:
    """Deterministic AP with ties: zeros for 5, 8, 14 and 0.5 for 20, 21."""
    if i in (5, 8, 14):
        return 0.0
    if i in (20, 21):
        return 0.5
    return round(0.05 + (i * 7 % 23) / 24, 4)


def _first_rank(i: int, ap: float):
    if i == 8:
        return None  # nothing relevant ranked: worst among the AP = 0 ties
    if i in (5, 14):
        return 40  # same AP and rank: query index decides
    if i == 20:
        return 3
    if i == 21:
        return 7
    return 1 if ap >= 0.6 else 2 + i % 9


def make_per_query(n: int = 30) -> pa.Table:
    rows = []
    for i in range(n):
        unknown = i in UNKNOWN
        ap = None if unknown else _ap(i)
        first = None if unknown else _first_rank(i, ap)
        row = {
            "query": i,
            "key": SCRIPT_KEY if i == 14 else f"q_{i:04d}.jpg",
            "label": -1 if unknown else i % 7,
            "group": GROUPS[i % 2],
            "n_relevant": 0 if unknown else 1 + i % 3,
            "n_junk": i % 2,
            "first_rank": first,
            "last_rank": None if first is None else first + 3,
            "ap": ap,
            "ap_trapz": ap,
            "inp": ap,
            "rr": None if unknown else (0.0 if first is None else 1.0 / first),
        }
        for k in KS:
            hit = None if unknown else float(first is not None and first <= k)
            row[f"hit_at_{k}"] = hit
            row[f"recall_at_{k}"] = hit
            row[f"precision_at_{k}"] = None if hit is None else hit / k
        score = 0.35 + 0.02 * (i % 10) + (0.3 if first == 1 else 0.0)
        row.update({
            "top1": 100 + i,
            "top1_key": f"g_{100 + i:05d}.jpg",
            "top1_score": score,
            "relevant_score": None if first is None else score - 0.01 * (first - 1),
            "accepted": score >= 0.6,
            "outcome": ("TP" if first == 1 else "FP") if score >= 0.6 else ("TN" if unknown else "FN"),
        })
        rows.append(row)
    return pa.Table.from_pylist(rows)


def make_summary(per_query: pa.Table) -> pa.Table:
    rows = []
    data = per_query.to_pylist()
    for name in ("all",) + GROUPS:
        sel = [r for r in data if name == "all" or r["group"] == name]
        known = [r for r in sel if r["n_relevant"] > 0]
        mean = lambda col, known=known: sum(r[col] for r in known) / len(known)  # noqa: E731
        outcomes = [r["outcome"] for r in sel]
        tp, fp, fn, tn = (outcomes.count(o) for o in ("TP", "FP", "FN", "TN"))
        row = {"group": name, "n_queries": len(sel), "n_evaluated": len(known), "n_unknown": len(sel) - len(known),
               "map": mean("ap") + 1e-5 / 3, "map_trapz": mean("ap_trapz"), "minp": mean("inp") * 0.9,
               "mrr": mean("rr")}
        for k in KS:
            for metric in ("hit", "recall", "precision"):
                row[f"{metric}_at_{k}"] = mean(f"{metric}_at_{k}")
        unknown = len(sel) - len(known)
        row.update({"threshold": 0.6, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
                    "rejection_accuracy": tn / max(unknown, 1), "fpir": 0.25, "fnir": (fn + fp) / max(len(known), 1)})
        rows.append(row)
    return pa.Table.from_pylist(rows)


def make_cmc() -> pa.Table:
    rows = [{"group": g, "k": k, "cmc": min(1.0, 0.4 + 0.03 * k + 0.05 * j)}
            for j, g in enumerate(("all",) + GROUPS) for k in range(1, 21)]
    return pa.Table.from_pylist(rows)


def make_sweep() -> pa.Table:
    rows = []
    for j, g in enumerate(("all",) + GROUPS):
        for t in range(21):
            thr = 0.3 + 0.03 * t
            rows.append({"group": g, "threshold": thr, "tp": 10, "fp": 2, "fn": 3, "tn": 1,
                         "fpir": max(0.0, 1 - t / 20 - 0.05 * j), "fnir": min(1.0, (t / 20) ** 2 + 0.1)})
    return pa.Table.from_pylist(rows)


RUN = {
    "options": {"protocol": "reid", "metric": "cosine", "ks": list(KS), "threshold": 0.6},
    "dataset": {"path": "/data/market1501.zarr"},
    "counts": {"queries": 30, "gallery": 500, "unknown_queries": 4},
    "warnings": ["4 queries have no relevant item"],
    "timings": {"total_s": 1.5},
    "versions": {"evalcore": "0.1.0"},
}


def expected_worst_keys(per_query: pa.Table, n: int) -> list[str]:
    """Worst-first keys computed straight from the rule, independently of the module."""
    known = [r for r in per_query.to_pylist() if r["n_relevant"] > 0]
    known.sort(key=lambda r: (r["ap"], -(math.inf if r["first_rank"] is None else r["first_rank"]), r["query"]))
    return [r["key"] for r in known[:n]]


@pytest.fixture(scope="module")
def tables():
    per_query = make_per_query()
    return {"per_query": per_query, "summary": make_summary(per_query), "cmc": make_cmc(), "sweep": make_sweep()}


@pytest.fixture(scope="module")
def page(tables):
    return render_report_html(tables["per_query"], tables["summary"], tables["cmc"], RUN, sweep=tables["sweep"])


def images(page: str) -> dict[str, str]:
    return dict(IMG.findall(page))


def svg_root(uri: str) -> ET.Element:
    """The parsed SVG of a ``data:image/svg+xml;base64`` URI."""
    assert uri.startswith(SVG_URI)
    return ET.fromstring(base64.b64decode(uri[len(SVG_URI):], validate=True))


def plot(page: str, alt_start: str) -> ET.Element:
    (uri,) = [uri for alt, uri in images(page).items() if alt.startswith(alt_start)]
    return svg_root(uri)


def axis_map(root: ET.Element, axis: str, log: bool = False):
    """Pixel -> value on an axis, fitted through the tick labels (what a reader sees), not the plotter's scale."""
    ticks = []
    for tick in root.iter(SVG + "g"):
        if tick.get("class") == f"{axis}tick":
            line = tick.find(SVG + "line")
            ticks.append((float(tick.find(SVG + "text").text), float(line.get("x1" if axis == "x" else "y1"))))
    assert len(ticks) >= 2, f"{axis} axis has fewer than two ticks"
    values = np.log10([v for v, _ in ticks]) if log else np.array([v for v, _ in ticks])
    slope, intercept = np.polyfit([p for _, p in ticks], values, 1)
    per_pixel = abs(slope)

    def value(pixel: float) -> float:
        fitted = slope * pixel + intercept
        return 10 ** fitted if log else fitted

    return value, per_pixel


def series_groups(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(SVG + "g") if g.get("class") == "series"]


def polyline_points(group: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in group.find(SVG + "polyline").get("points").split()]


def legend_labels(root: ET.Element) -> list[str]:
    return [g.find(SVG + "text").text for g in root.iter(SVG + "g") if g.get("class") == "legend-entry"]


def reference_lines(root: ET.Element) -> list[ET.Element]:
    return [line for line in root.iter(SVG + "line") if line.get("class") == "refline"]


# --------------------------------------------------------------------------- worst_queries


def test_worst_queries_order_and_columns(tables):
    worst = worst_queries(tables["per_query"], n=10)
    assert worst.column_names == ["query", "key", "label", "ap", "first_rank", "relevant_score", "top1_key", "top1_score"]
    assert worst.column("key").to_pylist() == expected_worst_keys(tables["per_query"], 10)
    # The tie-breaks the fixture was built for: null rank first, then rank 40 by query index.
    assert worst.column("query").to_pylist()[:3] == [8, 5, 14]


def test_worst_queries_excludes_unknown_and_limits(tables):
    every = worst_queries(tables["per_query"], n=None)
    assert every.num_rows == 30 - len(UNKNOWN)
    assert not set(every.column("query").to_pylist()) & UNKNOWN
    assert worst_queries(tables["per_query"], n=0).num_rows == 0


def test_worst_queries_only_present_columns():
    table = pa.table({"n_relevant": [1, 0, 2], "ap": [0.9, None, 0.1], "extra": ["a", "b", "c"]})
    worst = worst_queries(table, n=5)
    assert worst.column_names == ["ap"]
    assert worst.column("ap").to_pylist() == [0.1, 0.9]


# --------------------------------------------------------------------------- report page


def test_page_has_inline_svg_plots(page):
    found = images(page)
    alts = list(found)
    assert any(a.startswith("CMC") for a in alts)
    assert any("correct" in a and "known queries" in a for a in alts)
    assert any("unknown (open-set)" in a for a in alts)
    assert any("FPIR" in a for a in alts)
    assert any(a.startswith("DET") for a in alts)
    assert len(found) == 5
    for uri in found.values():
        root = svg_root(uri)
        assert root.tag == SVG + "svg" and root.get("viewBox") == "0 0 600 380"


def test_page_loads_nothing_from_outside(page):
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(s.startswith(SVG_URI) for s in sources)
    for forbidden in ("http://", "https://", "href=", "<link", "url(", "@import", "<iframe", "<script"):
        assert forbidden not in page.lower(), forbidden
    for uri in sources:  # nor do the images: no script, no links, no external resources
        text = base64.b64decode(uri[len(SVG_URI):]).decode("utf-8").lower()
        for forbidden in ("<script", "href", "url(", "<image", "<foreignobject", "on" + "load="):
            assert forbidden not in text, forbidden


def test_page_draws_no_matplotlib(tables):
    code = ("import sys, pyarrow as pa, pyarrow.parquet as pq\n"
            "from evalcore.render.pages import render_report_html\n"
            "t = {n: pq.read_table(sys.argv[1] + '/' + n + '.parquet') for n in ('per_query', 'summary', 'cmc', 'sweep')}\n"
            "render_report_html(t['per_query'], t['summary'], t['cmc'], {}, sweep=t['sweep'])\n"
            "from evalcore.render.pages import render_trend_html\n"
            "render_trend_html(pa.table({'run_date': ['2025-01-01', '2025-01-02'], 'evaluation': ['a', 'a'],\n"
            "                            'group': ['all', 'all'], 'map': [0.5, 0.6]}))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n")
    import os
    import sys
    import tempfile

    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as folder:
        for name, table in tables.items():
            pq.write_table(table, os.path.join(folder, name + ".parquet"))
        done = subprocess.run([sys.executable, "-c", code, folder], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_cmc_plot_maps_back_to_values(tables, page):
    root = plot(page, "CMC")
    x_value, x_per_pixel = axis_map(root, "x")
    y_value, y_per_pixel = axis_map(root, "y")
    rows = tables["cmc"].to_pylist()
    groups = series_groups(root)
    assert [g.get("data-series") for g in groups] == ["all", "day", "night"]
    for group in groups:
        expected = sorted((r["k"], r["cmc"]) for r in rows if r["group"] == group.get("data-series"))
        points = polyline_points(group)
        assert len(points) == len(expected) == 20
        # each point within a pixel of (k, cmc)
        assert all(abs(x_value(x) - k) <= x_per_pixel and abs(y_value(y) - v) <= y_per_pixel for (x, y), (k, v) in zip(points, expected))
        assert len(group.findall(SVG + "circle")) == 20  # markers on short curves
    assert legend_labels(root) == ["all", "day", "night"]
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "rank k" in texts and "Cumulative match characteristic" in texts


def test_cmc_y_axis_is_fitted_to_a_curve_that_starts_high(tables):
    high = pa.table({"group": ["all"] * 50, "k": list(range(1, 51)), "cmc": [0.99 + 0.0002 * k for k in range(1, 51)]})
    root = plot(render_report_html(tables["per_query"], tables["summary"], high, RUN), "CMC")
    y_value, y_per_pixel = axis_map(root, "y")
    ys = [y for _, y in polyline_points(series_groups(root)[0])]
    # the curve spans most of the plot's height instead of a flat line at the top of a 0..1 axis
    assert max(ys) - min(ys) > 100
    assert all(abs(y_value(y) - v) <= y_per_pixel for y, v in zip(ys, high.column("cmc").to_pylist()))


def test_summary_tables_stay_narrow(tables):
    wide = tables["summary"]
    for i in range(12):
        wide = wide.append_column(f"hit_at_{100 + i}", pa.array([0.5] * wide.num_rows))
    page = render_report_html(tables["per_query"], wide, tables["cmc"], RUN)
    summary = page.split("<h2>Summary</h2>", 1)[1].split("<h2>", 1)[0]
    heads = re.findall(r"<thead><tr>(.*?)</tr></thead>", summary)
    assert heads and all(h.count("<th") <= 9 for h in heads)
    assert all(f'title="hit_at_{100 + i}"' in summary for i in range(12))


def test_cmc_plot_log_axis_beyond_rank_100():
    k = np.arange(1, 501)
    cmc = pa.table({"group": ["all"] * 500, "k": k, "cmc": 1 - 0.6 / np.sqrt(k)})
    page = render_report_html(make_per_query(), pa.table({"group": ["all"]}), cmc, {})
    root = plot(page, "CMC")
    ticks = [t.find(SVG + "text").text for t in root.iter(SVG + "g") if t.get("class") == "xtick"]
    assert ticks == ["1", "10", "100"]
    x_value, _ = axis_map(root, "x", log=True)
    (group,) = series_groups(root)
    points = polyline_points(group)
    assert len(points) == 500 and not group.findall(SVG + "circle")
    assert np.allclose([x_value(x) for x, _ in points], k, rtol=0.01)


def test_score_histograms_follow_counts(tables, page):
    data = [r for r in tables["per_query"].to_pylist() if r["n_relevant"] > 0]
    correct = np.array([r["top1_score"] for r in data if r["first_rank"] == 1])
    wrong = np.array([r["top1_score"] for r in data if r["first_rank"] != 1])
    every = np.concatenate([correct, wrong])
    bins = np.linspace(every.min(), every.max(), 31)  # 30 shared bins over the scores' range
    root = plot(page, "Rank-1 scores of known queries whose")
    groups = series_groups(root)
    assert [g.get("data-series") for g in groups] == ["correct at rank 1", "incorrect at rank 1"]
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    for group, panel, scores in zip(groups, panels, (correct, wrong)):
        y_value, y_per_pixel = axis_map(panel, "y")  # each series its own panel and count axis
        counts = np.histogram(scores, bins)[0]
        heights = np.array([float(r.get("height")) for r in group.iter(SVG + "rect")])
        assert len(heights) == np.count_nonzero(counts)
        # height in axis units is the count, within a pixel
        assert np.all(np.abs(heights * y_per_pixel - counts[counts > 0]) <= y_per_pixel)
    assert legend_labels(root) == [f"correct at rank 1 (n={len(correct)})", f"incorrect at rank 1 (n={len(wrong)})", "threshold 0.6"]
    x_value, x_per_pixel = axis_map(root, "x")
    lines = reference_lines(root)
    assert len(lines) == 2  # through both panels
    assert all(abs(x_value(float(line.get("x1"))) - 0.6) <= x_per_pixel for line in lines)


def test_sweep_plot_lines_and_threshold(tables, page):
    root = plot(page, "Open-set error rates")
    groups = series_groups(root)
    assert len(groups) == 6  # FPIR and FNIR for all, day, night
    y_value, y_per_pixel = axis_map(root, "y")
    x_value, x_per_pixel = axis_map(root, "x")
    rows = tables["sweep"].to_pylist()
    for group in groups:
        rate, name = group.get("data-series").split()
        expected = sorted((r["threshold"], r[rate.lower()]) for r in rows if r["group"] == name)
        points = polyline_points(group)
        assert len(points) == 21
        assert all(abs(x_value(x) - t) <= x_per_pixel and abs(y_value(y) - v) <= y_per_pixel for (x, y), (t, v) in zip(points, expected))
        dashed = group.find(SVG + "polyline").get("stroke-dasharray") is not None
        assert dashed == (rate == "FNIR")
    assert legend_labels(root) == ["FPIR", "FNIR", "all", "day", "night", "threshold 0.6"]
    # only FPIR, FNIR and the threshold are line samples (a solid "all" sample would read as FPIR); groups are
    # colour patches in their lines' colours
    entries = [g for g in root.iter(SVG + "g") if g.get("class") == "legend-entry"]
    samples = {g.find(SVG + "text").text: g[0] for g in entries}
    assert [n for n, e in samples.items() if e.tag == SVG + "line"] == ["FPIR", "FNIR", "threshold 0.6"]
    colors = {g.get("data-series").split()[1]: g.find(SVG + "polyline").get("stroke") for g in groups}
    assert all(samples[n].tag == SVG + "rect" and samples[n].get("fill") == colors[n] for n in ("all", "day", "night"))
    (line,) = reference_lines(root)
    assert abs(x_value(float(line.get("x1"))) - 0.6) <= x_per_pixel


@pytest.mark.parametrize("case", ["no queries", "empty gallery"])
def test_page_of_empty_evaluation_is_quiet(case, capfd):
    # Real tables of evaluations with Q = 0 or G = 0: nothing to plot, notes instead, and not a word on stderr.
    eye = np.eye(4, dtype=np.float32)
    arrays = {"no queries": dict(query=np.zeros((0, 4), np.float32), gallery=eye, query_labels=np.zeros(0, int), gallery_labels=[0, 1, 2, 3]),
              "empty gallery": dict(query=eye[:3], gallery=np.zeros((0, 4), np.float32), query_labels=[0, 1, 2], gallery_labels=np.zeros(0, int))}
    result = evalcore.evaluate(**arrays[case], threshold=0.5, sweep=True)
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = render_report_html(result.per_query, result.summary, result.cmc, {}, sweep=result.sweep)
    assert "Nothing to plot" in page and "<figure" not in page  # one note, not an empty box per plot
    assert "<img" not in page
    assert capfd.readouterr().err == ""


def test_page_lists_worst_queries_worst_first(tables, page):
    keys = [html.escape(k) for k in expected_worst_keys(tables["per_query"], 20)]
    positions = [page.find(k) for k in keys]
    assert all(p >= 0 for p in positions)
    assert positions == sorted(positions)
    best = max((r for r in tables["per_query"].to_pylist() if r["n_relevant"] > 0), key=lambda r: r["ap"])
    assert best["key"] not in expected_worst_keys(tables["per_query"], 20)
    assert best["key"] not in page  # only the 20 worst are listed


def test_page_escapes_keys(page):
    assert "<script>" not in page
    assert html.escape(SCRIPT_KEY) in page


def test_page_summary_header_and_values(tables, page):
    summary = tables["summary"].to_pylist()
    for row in summary:
        assert f">{row['group']}<" in page
        assert f"{row['map']:.4f}" in page
        assert f"{row['fnir']:.4f}" in page
    assert f"{summary[0]['map']:.5f}" not in page  # floats are cut to 4 decimals
    for text in ("/data/market1501.zarr", "reid", "gallery: 500", "4 queries have no relevant item"):
        assert html.escape(text) in page


def test_page_without_sweep_or_unknown_queries(tables):
    per_query = tables["per_query"].filter(pa.compute.greater(tables["per_query"].column("n_relevant"), 0))
    page = render_report_html(per_query, tables["summary"], tables["cmc"], RUN)
    alts = list(images(page))
    assert len(alts) == 2
    assert not any("FPIR" in a or "unknown" in a for a in alts)


def test_page_title_is_escaped(tables):
    page = render_report_html(tables["per_query"], tables["summary"], tables["cmc"], {}, title="a <b> & c")
    assert "<title>a &lt;b&gt; &amp; c</title>" in page


def _edge_cases():
    full = make_per_query()
    nulls = pa.nulls(full.num_rows, pa.float64())
    return {
        "empty": full.slice(0, 0),
        "no_known": full.set_column(full.schema.get_field_index("n_relevant"), "n_relevant",
                                    pa.array([0] * full.num_rows, pa.int64()))
                        .set_column(full.schema.get_field_index("ap"), "ap", nulls),  # R = 0: metrics null
        "few_columns": full.select(["query", "n_relevant", "first_rank", "ap"]),
        "all_null": full.set_column(full.schema.get_field_index("top1_score"), "top1_score", nulls)
                        .set_column(full.schema.get_field_index("relevant_score"), "relevant_score", nulls),
        "no_query_no_key": full.drop_columns(["query", "key"]),
    }


@pytest.mark.parametrize("case", sorted(_edge_cases()))
def test_page_survives_degenerate_inputs(case, tables):
    per_query = _edge_cases()[case]
    summary = tables["summary"].slice(0, 0) if case == "empty" else tables["summary"]
    cmc = tables["cmc"].slice(0, 0) if case == "empty" else tables["cmc"]
    page = render_report_html(per_query, summary, cmc, {"dataset": None})
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    if case in ("empty", "no_known"):
        assert "No known queries" in page
    if case == "empty":
        assert "Nothing to plot" in page and "The summary is empty" in page
    if case == "all_null":
        assert "Rank-1 scores" not in page and "<figure><p" not in page  # left out, not an empty box
    if case == "few_columns":
        assert "Rank-1 scores" not in page and "<figure><p" not in page
        worst = expected_worst_keys(make_per_query(), 1)[0]  # q_0008.jpg: shown by query index
        assert re.search(r'<td class="num">8</td>', page) and worst not in page
    if case == "no_query_no_key":
        assert "Worst queries" in page and "q_0008" not in page


# --------------------------------------------------------------------------- terminal


def test_terminal_summary(tables):
    text = format_terminal(tables["summary"], tables["per_query"], n_worst=5, width=100)
    for row in tables["summary"].to_pylist():
        assert row["group"] in text
        assert f"{row['map']:.4f}" in text
        assert f"{row['fpir']:.4f}" in text
    for label in ("mAP", "mINP", "MRR", "hit@1", "hit@10", "TP", "FNIR"):
        assert label in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_terminal_splits_wide_tables(tables):
    wide = format_terminal(tables["summary"], width=200)
    narrow = format_terminal(tables["summary"], width=50)
    header = lambda t: [line for line in t.splitlines() if line.startswith("group")]  # noqa: E731
    assert len(header(wide)) == 2  # ranking metrics, then open-set counts and rates
    assert len(header(narrow)) >= 3  # the ranking block no longer fits in one table
    assert all(len(line) <= 50 for line in narrow.splitlines())
    assert f"{tables['summary'].column('mrr')[2].as_py():.4f}" in narrow


def test_terminal_worst_queries(tables):
    text = format_terminal(tables["summary"], tables["per_query"], n_worst=6, width=100)
    keys = expected_worst_keys(tables["per_query"], 6)
    positions = [text.find(k) for k in keys]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    assert expected_worst_keys(tables["per_query"], 7)[-1] not in text


def test_terminal_shortens_long_keys(tables):
    long_key = "/very/long/path/" * 20 + "file_0008.jpg"
    per_query = tables["per_query"].set_column(1, "key", pa.array([long_key] * 30))
    text = format_terminal(tables["summary"], per_query, n_worst=3, width=80)
    assert long_key not in text
    assert re.search(r" …[a-z/]+/file_0008\.jpg ", text)  # cut from the left, file name kept
    assert all(len(line) <= 80 for line in text.splitlines())


# --------------------------------------------------------------------------- trend page


def make_history() -> pa.Table:
    rows = []
    for day in range(1, 8):
        for e, evaluation in enumerate(("market1501", "gldv2", "sop")):
            for group in ("all", "night"):
                base = 0.5 + 0.1 * e + 0.01 * day
                rows.append({"run_date": f"2025-03-{day:02d}", "evaluation": evaluation, "group": group,
                             "map": base if group == "all" else 0.1234, "minp": base - 0.2, "mrr": base + 0.05,
                             "hit_at_1": base + 0.1, "n_queries": 100})
    return pa.Table.from_pylist(rows)


def test_trend_one_image_per_metric():
    history = make_history()
    page = render_trend_html(history, metrics=["map", "mrr"])
    found = images(page)
    assert len(found) == 2
    for uri in found.values():
        root = svg_root(uri)  # an SVG chart: one line per evaluation, x ticks labelled as dates
        assert [g.get("data-series") for g in series_groups(root)] == ["market1501", "gldv2", "sop"]
        assert "Mar 01" in base64.b64decode(uri.split(",", 1)[1]).decode()
    assert len(images(render_trend_html(history))) == 4  # every float column: map, minp, mrr, hit_at_1


def test_trend_latest_values_use_group_all():
    page = render_trend_html(make_history(), metrics=["map"])
    assert "0.7700" in page  # market1501 on 2025-03-07 (0.5 + 0.2 + 0.07)
    assert "(+0.0100)" in page
    assert "0.1234" not in page  # night rows are ignored
    assert "2025-03-07" in page and "market1501" in page


def test_trend_rejects_unknown_metric_and_bad_date():
    with pytest.raises(InputError, match="nope"):
        render_trend_html(make_history(), metrics=["nope"])
    bad = pa.table({"run_date": ["yesterday"], "evaluation": ["x"], "group": ["all"], "map": [0.5]})
    with pytest.raises(InputError, match="yesterday"):
        render_trend_html(bad)


# --------------------------------------------------------------------------- real browser


def trend_page() -> str:
    return render_trend_html(make_history(), metrics=["map", "mrr"])


@pytest.mark.parametrize("which", ["report", "trend"])
def test_page_renders_in_chromium(tmp_path, page, which):
    """A screenshot at 1300 px wide (the width the issue's screenshots used) of each page this module draws."""
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed")
    page = page if which == "report" else trend_page()
    target = tmp_path / "report.html"
    target.write_text(page, encoding="utf-8")
    shot = tmp_path / "shot.png"
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1300,2000",
               target.as_uri()]
    subprocess.run(command, capture_output=True, timeout=90, check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000
