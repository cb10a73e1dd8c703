"""Tests of evalcore.render.pages: HTML report, trend page, terminal text, report loading."""
from __future__ import annotations

import base64
import html
import math
import re
import shutil
import subprocess

import pyarrow as pa
import pytest

from evalcore.errors import InputError
from evalcore.render.pages import (
    format_terminal,
    render_report_html,
    render_trend_html,
    worst_queries,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
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


# --------------------------------------------------------------------------- worst_queries


def test_worst_queries_order_and_columns(tables):
    worst = worst_queries(tables["per_query"], n=10)
    assert worst.column_names == ["query", "key", "top1_key", "top1_score", "relevant_score", "first_rank", "ap"]
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


def test_page_has_inline_png_plots(page):
    found = images(page)
    alts = list(found)
    assert any(a.startswith("CMC") for a in alts)
    assert any("correct" in a and "known queries" in a for a in alts)
    assert any("unknown (open-set)" in a for a in alts)
    assert any("FPIR" in a for a in alts)
    assert len(found) == 4
    for uri in found.values():
        assert uri.startswith("data:image/png;base64,")
        assert base64.b64decode(uri.split(",", 1)[1], validate=True).startswith(PNG_MAGIC)


def test_page_loads_nothing_from_outside(page):
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    for forbidden in ("http://", "https://", "href=", "<link", "url(", "@import", "<iframe", "<script"):
        assert forbidden not in page.lower(), forbidden


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
                                    pa.array([0] * full.num_rows, pa.int64())),
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
        assert "No CMC data" in page and "The summary is empty" in page
    if case == "all_null":
        assert "No rank-1 scores" in page
    if case == "few_columns":
        assert "No top1_score column" in page
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
        assert base64.b64decode(uri.split(",", 1)[1]).startswith(PNG_MAGIC)
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


def test_page_renders_in_chromium(tmp_path, page):
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed")
    target = tmp_path / "report.html"
    target.write_text(page, encoding="utf-8")
    shot = tmp_path / "shot.png"
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
               target.as_uri()]
    subprocess.run(command, capture_output=True, timeout=90, check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000
