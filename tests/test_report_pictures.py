"""The report page's pictures and tables, read from report.html of real small runs (issue 39, item 4).

Each test parses what the page draws (the SVG of an ``<img>``, the HTML tables) and checks it against
values computed here from the inputs (numpy brute force), not against the renderer's own numbers.
"""
from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import evalcore
from evalcore.render.pages import render_report_html

SVG = "{http://www.w3.org/2000/svg}"
SVG_URI = "data:image/svg+xml;base64,"
IMG = re.compile(r'<img alt="([^"]*)" src="([^"]*)"')
CLI = [str(Path(sys.executable).with_name("evalcore"))]


# --------------------------------------------------------------------------- a real run


def reid_arrays(seed: int = 3):
    """30 identities x 10 gallery images on 4 cameras; 600 easy known queries (a peak of hundreds of correct
    rank-1 scores), 6 hard ones (random vectors: mostly wrong at rank 1) and 57 unknown identities."""
    rng = np.random.default_rng(seed)
    dims, ids = 32, 30
    proto = rng.normal(size=(ids, dims))
    gl = np.repeat(np.arange(ids), 10)
    gc = np.tile(np.arange(4), len(gl) // 4 + 1)[: len(gl)]
    gallery = proto[gl] + 0.25 * rng.normal(size=(len(gl), dims))
    ql_easy = rng.integers(0, ids, 600)
    easy = proto[ql_easy] + 0.25 * rng.normal(size=(600, dims))
    ql_hard = rng.integers(0, ids, 6)
    hard = rng.normal(size=(6, dims))
    unknown = rng.normal(size=(57, dims))
    query = np.concatenate([easy, hard, unknown])
    ql = np.concatenate([ql_easy, ql_hard, 1000 + np.arange(57)])
    qc = rng.integers(0, 4, len(ql))
    return dict(query=query.astype(np.float32), gallery=gallery.astype(np.float32), query_labels=ql,
                gallery_labels=gl, query_cams=qc, gallery_cams=gc)


@pytest.fixture(scope="module")
def arrays():
    return reid_arrays()


@pytest.fixture(scope="module")
def result(arrays):
    return evalcore.evaluate(**arrays, protocol="reid", threshold=0.5, sweep=True)


@pytest.fixture(scope="module")
def page(result, tmp_path_factory):
    out = result.save(str(tmp_path_factory.mktemp("pictures") / "report"))
    return (Path(out) / "report.html").read_text(encoding="utf-8")


def images(page: str) -> dict[str, ET.Element]:
    return {alt: ET.fromstring(base64.b64decode(uri[len(SVG_URI):])) for alt, uri in IMG.findall(page)}


def plot(page: str, alt_start: str) -> ET.Element:
    (root,) = [root for alt, root in images(page).items() if alt.startswith(alt_start)]
    return root


def ticks(root: ET.Element, axis: str) -> list[tuple[str, float]]:
    """(label, pixel) of each labelled tick of an axis."""
    out = []
    for g in root.iter(SVG + "g"):
        if g.get("class") == f"{axis}tick":
            line = g.find(SVG + "line")
            out.append((g.find(SVG + "text").text, float(line.get("x1" if axis == "x" else "y1"))))
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a.astype(np.float64) @ b.astype(np.float64).T


def brute_force_reid(arrays):
    """Per query: (R, rank-1 score, first relevant rank or None, best relevant score) by a full sort, Market-1501
    rule (same identity and camera is junk)."""
    s = cosine(arrays["query"], arrays["gallery"])
    out = []
    for i, (label, cam) in enumerate(zip(arrays["query_labels"], arrays["query_cams"])):
        same = arrays["gallery_labels"] == label
        keep = ~(same & (arrays["gallery_cams"] == cam))
        relevant = same & keep
        scores = s[i, keep]
        best = s[i, relevant].max() if relevant.any() else None
        first = None if best is None else int((scores > best).sum()) + 1
        out.append((int(relevant.sum()), float(scores.max()), first, best))
    return out


# --------------------------------------------------------------------------- CMC


def test_cmc_x_axis_labels_rank_1(page):
    root = plot(page, "CMC")
    xticks = ticks(root, "x")
    labels = [t for t, _ in xticks]
    assert labels[0] == "1", labels
    (series,) = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
    first_x = float(series.find(SVG + "polyline").get("points").split()[0].split(",")[0])
    assert abs(xticks[0][1] - first_x) < 0.5  # the tick "1" stands where the curve's k = 1 point is


def test_cmc_log_axis_on_request_labels_1_2_5(result):
    page = render_report_html(result.per_query, result.summary, result.cmc, {}, cmc_scale="log")
    root = plot(page, "CMC")
    xticks = ticks(root, "x")
    assert [t for t, _ in xticks] == ["1", "2", "5", "10", "20", "50"]
    # log-spaced: pixel is linear in log10(k) (max_rank 50 by default)
    values = np.log10([float(t) for t, _ in xticks])
    pixels = np.array([p for _, p in xticks])
    slope, intercept = np.polyfit(values, pixels, 1)
    assert np.allclose(slope * values + intercept, pixels, atol=0.05)


@pytest.mark.parametrize("hi, expected", [(50, [1, 10, 20, 30, 40, 50]), (20, [1, 5, 10, 15, 20]), (2, [1, 2]),
                                          (1000, [1, 200, 400, 600, 800, 1000])])
def test_rank_ticks_start_at_1(hi, expected):
    from evalcore.render import svg

    assert svg.ticks_from(1, hi) == expected


@pytest.mark.parametrize("lo, hi, expected", [(1, 50, [1, 2, 5, 10, 20, 50]), (0.01, 1, [0.01, 0.1, 1]),
                                              (0.1, 1, [0.1, 0.2, 0.5, 1]), (0.001, 1, [0.001, 0.01, 0.1, 1])])
def test_log_ticks_125_under_two_decades_else_decades(lo, hi, expected):
    from evalcore.render import svg

    assert svg.log_ticks_125(lo, hi) == expected


# --------------------------------------------------------------------------- score histograms


def _bars(root: ET.Element, name: str) -> list[float]:
    (group,) = [g for g in root.iter(SVG + "g") if g.get("class") == "series" and g.get("data-series") == name]
    return [float(r.get("height")) for r in group.iter(SVG + "rect")]


def test_incorrect_at_rank_1_bars_are_visible_beside_a_peak_of_hundreds(arrays, page):
    truth = brute_force_reid(arrays)
    known = [(top, first) for r, top, first, _ in truth if r > 0]
    correct = np.array([top for top, first in known if first == 1])
    wrong = np.array([top for top, first in known if first != 1])
    bins = np.linspace(min(correct.min(), wrong.min()), max(correct.max(), wrong.max()), 31)
    assert np.histogram(correct, bins)[0].max() >= 100  # the setting of the finding: a peak of hundreds
    wrong_counts = np.histogram(wrong, bins)[0]
    assert 1 <= wrong_counts[wrong_counts > 0].min() <= 5
    root = plot(page, "Rank-1 scores of known queries whose")
    heights = _bars(root, "incorrect at rank 1")
    assert len(heights) == np.count_nonzero(wrong_counts)
    # a bin holding one query is a bar a reader sees, not a pixel line
    assert min(heights) >= 4, heights


def test_unknown_query_bars_are_visible_beside_the_known_ones(arrays, page):
    truth = brute_force_reid(arrays)
    unknown = [top for r, top, _, _ in truth if r == 0]
    assert len(unknown) == 57
    root = plot(page, "Rank-1 scores of known queries and of unknown")
    heights = _bars(root, "unknown")
    assert heights and min(heights) >= 4, heights


# --------------------------------------------------------------------------- DET


def test_det_plot_has_log_axes_and_the_sweeps_rates(result, page):
    root = plot(page, "DET")
    for axis in ("x", "y"):
        found = ticks(root, axis)
        values = [float(t) for t, _ in found]
        assert len(values) >= 3, found
        decades = [v for v in values if np.isclose(np.log10(v), round(np.log10(v)))]
        assert len(decades) >= 2  # 0.01, 0.1, 1 ...
        pixels = [p for t, p in found if float(t) in decades]
        steps = np.diff(pixels)
        assert np.allclose(steps, steps[0], atol=0.05)  # one decade, one distance: a log axis
    # the all-group curve maps back to the sweep's (FPIR, FNIR) through the tick labels
    fit = {}
    for axis in ("x", "y"):
        found = ticks(root, axis)
        fit[axis] = np.polyfit([p for _, p in found], np.log10([float(t) for t, _ in found]), 1)
    (line,) = [g for g in root.iter(SVG + "g") if g.get("class") == "series" and g.get("data-series") == "all"]
    points = [tuple(map(float, p.split(","))) for p in line.find(SVG + "polyline").get("points").split()]
    drawn = [(10 ** np.polyval(fit["x"], x), 10 ** np.polyval(fit["y"], y)) for x, y in points]
    rows = [r for r in result.sweep.to_pylist() if r["group"] == "all" and r["fpir"] and r["fnir"]]
    expected = sorted((r["fpir"], r["fnir"]) for r in rows)
    assert len(drawn) == len(expected)
    assert np.allclose(drawn, expected, rtol=0.01)


# --------------------------------------------------------------------------- tables


def test_summary_headers_are_labels_not_snake_case(arrays):
    run = evalcore.evaluate(**arrays, protocol="reid", threshold=0.5, sweep=True, target_fpir=0.1, ci=0.9,
                            resamples=50)
    page = render_report_html(run.per_query, run.summary, run.cmc, {}, sweep=run.sweep)
    summary = page.split("<h2>Summary</h2>", 1)[1].split("<h2>", 1)[0]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", summary)
    assert headers and not [h for h in headers if re.search(r"[a-z]_[a-z0-9]", h)], headers


def test_summary_tables_keep_a_family_together_and_wrap(page):
    summary = page.split("<h2>Summary</h2>", 1)[1].split("<h2>", 1)[0]
    tables = re.findall(r"<table>.*?</table>", summary, re.S)
    hits = [t for t in tables if 'title="hit_at_1"' in t]
    assert len(hits) == 1 and all(f'title="hit_at_{k}"' in hits[0] for k in (1, 3, 5, 10))
    # tables sit in boxes that wrap to the next line, not in one that scrolls sideways
    assert '<div class="scroll"><table>' not in summary
    assert re.search(r"\.tables\{[^}]*flex-wrap:wrap", page)
    assert "th{" in page and "white-space:nowrap" not in re.search(r"th\{[^}]*\}", page).group(0)


def _worst_rows(page: str) -> tuple[list[str], list[list[str]]]:
    worst = page.split("<h2>Worst queries</h2>", 1)[1]
    table = re.search(r"<table>.*?</table>", worst, re.S).group(0)
    heads = re.findall(r'<th title="([^"]*)"', table)
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in re.findall(r"<tr>(<td.*?)</tr>", table, re.S)]
    return heads, rows


def test_worst_queries_show_identity_camera_rank_and_score(arrays, page):
    heads, rows = _worst_rows(page)
    for column in ("label", "cam", "first_rank", "relevant_score"):
        assert column in heads, heads
    truth = brute_force_reid(arrays)
    assert rows
    for row in rows:
        cell = dict(zip(heads, row))
        i = int(cell["query"])
        _, _, first, best = truth[i]
        assert int(cell["label"]) == arrays["query_labels"][i]
        assert int(cell["cam"]) == arrays["query_cams"][i]
        assert int(cell["first_rank"]) == first
        assert abs(float(cell["relevant_score"]) - best) < 1e-4


# --------------------------------------------------------------------------- an IR (qrels) run


QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n2 0 d4 1\n3 0 d5 0\n3 0 d6 0\n"
RUN = ("1 Q0 d2 1 3.0 t\n1 Q0 d1 2 2.0 t\n1 Q0 d9 3 1.0 t\n2 Q0 d4 1 3.0 t\n2 Q0 d3 2 2.5 t\n"
       "3 Q0 d5 1 2.0 t\n3 Q0 d6 2 1.0 t\n")


@pytest.fixture(scope="module")
def ir_page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ir")
    (folder / "qrels.txt").write_text(QRELS)
    (folder / "run.txt").write_text(RUN)
    done = subprocess.run([*CLI, "import", "trec-run", str(folder / "run.txt"), "--qrels", str(folder / "qrels.txt"),
                           "--out", str(folder / "t.zarr")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EVALCORE_DEBUG": ""})
    assert done.returncode == 0, done.stderr
    # query 3 has judgements but nothing relevant: --empty-queries zero scores it 0, so 3 queries are evaluated
    run = evalcore.evaluate(str(folder / "t.zarr"), metrics=["map", "ndcg@10"], empty_queries="zero")
    assert run.summary.column("n_evaluated").to_pylist() == [3]
    out = run.save(str(folder / "report"))
    return (Path(out) / "report.html").read_text(encoding="utf-8")


def test_ir_report_has_no_empty_boxes(ir_page):
    assert "No CMC data" not in ir_page
    assert "No rank-1 scores" not in ir_page
    assert not re.search(r'<figure><p class="note">', ir_page)


def test_ir_report_counts_the_evaluated_queries(ir_page):
    # three queries in the qrels, each judged: all three are evaluated (two with a relevant item, one scored 0)
    judged = {line.split()[0] for line in QRELS.splitlines()}
    assert re.search(rf"The 3 lowest-AP of {len(judged)} evaluated queries", ir_page)
    heads, rows = _worst_rows(ir_page)
    assert sorted(int(dict(zip(heads, r))["query"]) for r in rows) == [0, 1, 2]


def test_page_without_first_rank_draws_no_correct_incorrect_split(result):
    # without first_rank, every query would read as incorrect at rank 1
    per_query = result.per_query.drop_columns(["first_rank"])
    page = render_report_html(per_query, result.summary, result.cmc, {})
    assert not any(alt.startswith("Rank-1 scores of known queries whose") for alt in images(page))
    assert isinstance(per_query, pa.Table)


# --------------------------------------------------------------------------- in a browser (when one is installed)

_MEASURE = """<script>
const main = document.querySelector("main").getBoundingClientRect();
const summary = [...document.querySelectorAll(".tables table")].map(t => t.getBoundingClientRect().right);
document.body.setAttribute("data-measure", JSON.stringify({main: main.right, summary: summary,
  page: document.documentElement.scrollWidth, view: document.documentElement.clientWidth,
  images: [...document.querySelectorAll("img")].filter(i => i.naturalWidth > 0 && i.width > 0).length}));
</script>"""


@pytest.mark.parametrize("width", [700, 1300])
def test_page_in_chromium_fits_the_window(tmp_path, page, width):
    """Laid out by Debian's chromium at the issue's widths: every plot drawn, no summary table past the page's
    right edge, nothing scrolling sideways; and a screenshot is taken. Skipped without chromium."""
    import json
    import shutil

    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed")
    target = tmp_path / "report.html"
    target.write_text(page.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
              "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
              f"--window-size={width},2400"]
    dom = subprocess.run([*common, "--dump-dom", target.as_uri()], capture_output=True, text=True, timeout=90)
    found = re.search(r'data-measure="([^"]*)"', dom.stdout)
    assert found, dom.stderr[-2000:]
    measure = json.loads(found.group(1).replace("&quot;", '"'))
    assert measure["images"] == len(images(page))
    assert measure["summary"] and max(measure["summary"]) <= measure["main"] + 1
    assert measure["page"] <= measure["view"]
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", target.as_uri()], capture_output=True, timeout=90)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and int.from_bytes(data[16:20], "big") == width
