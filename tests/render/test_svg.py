"""Unit tests of evalcore.render.svg: ticks, scaling, chart structure (hand-computed expectations)."""
from __future__ import annotations

import base64
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from evalcore.render import svg

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode("utf-8"))


# --------------------------------------------------------------------------- ticks


@pytest.mark.parametrize("lo, hi, integer, expected", [
    (0, 1, False, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (0, 1.02, False, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),  # the CMC / rate axes
    (1, 20, True, [5, 10, 15, 20]),  # span 19: steps 1 and 2 give more than 7 ticks
    (1, 2, True, [1, 2]),
    (0, 3.15, True, [0, 1, 2, 3]),  # counts: never 0.5
    (0, 0.3, True, [0]),  # an integer axis never gets fractional ticks
    (-0.51, 0.52, False, [-0.4, -0.2, 0, 0.2, 0.4]),
    (0.3, 0.9, False, [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
    (0, 1200, False, [0, 200, 400, 600, 800, 1000, 1200]),
])
def test_linear_ticks(lo, hi, integer, expected):
    assert svg.linear_ticks(lo, hi, integer=integer) == pytest.approx(expected, abs=1e-12)


def test_ticks_are_exact_decimals():
    # 3 * 0.2 is 0.6000000000000001 in floating point; the label must read 0.6
    ticks = svg.linear_ticks(0, 1)
    assert 0.6 in ticks
    assert svg.tick_labels(ticks) == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    assert svg.tick_labels([0, 5, 10]) == ["0", "5", "10"]
    assert svg.tick_labels([0.95, 1.0, 1.05]) == ["0.95", "1.00", "1.05"]


@pytest.mark.parametrize("span, max_ticks, integer, expected", [
    (1, 7, False, 0.2), (1, 11, False, 0.1), (19, 7, True, 5), (0.03, 7, False, 0.005), (3, 7, True, 1), (0.3, 7, True, 1),
])
def test_nice_step_is_1_2_5(span, max_ticks, integer, expected):
    assert svg.nice_step(span, max_ticks, integer) == pytest.approx(expected)


def test_log_ticks_are_decades():
    assert svg.log_ticks(1, 1000) == [1, 10, 100, 1000]
    assert svg.log_ticks(1, 2500) == [1, 10, 100, 1000]
    assert svg.log_ticks(3, 50) == svg.linear_ticks(3, 50)
    assert svg.tick_labels([1, 10, 100, 1000], log=True) == ["1", "10", "100", "1000"]


# --------------------------------------------------------------------------- scaling


def test_scale_linear_and_inverted():
    assert svg.scale(0.5, 0, 1, 100, 300) == 200
    assert svg.scale(0, 0, 1, 100, 300) == 100 and svg.scale(1, 0, 1, 100, 300) == 300
    # y axes map the low end to the bottom pixel
    assert svg.scale(0.25, 0, 1, 300, 100) == 250


def test_scale_log():
    assert svg.scale(10, 1, 1000, 0, 300, log=True) == pytest.approx(100)
    assert svg.scale(100, 1, 1000, 0, 300, log=True) == pytest.approx(200)
    assert svg.scale(np.sqrt(10), 1, 10, 0, 100, log=True) == pytest.approx(50)


def test_padded():
    assert svg.padded(0, 1) == pytest.approx((-0.02, 1.02))
    assert svg.padded(2, 2) == (1.5, 2.5)


# --------------------------------------------------------------------------- charts


def _ticks(root: ET.Element, axis: str) -> list[tuple[float, float]]:
    """(value read from the label, pixel of the grid line) of every tick."""
    out = []
    for tick in root.iterfind(f".//s:g[@class='{axis}tick']", NS):
        line = tick.find("s:line", NS)
        pixel = float(line.get("x1" if axis == "x" else "y1"))
        out.append((float(tick.find("s:text", NS).text), pixel))
    return out


def test_line_chart_structure_and_escaping():
    series = [svg.Series("a<b>&c", [1, 2, 3], [0.1, 0.5, 0.9], "#1f77b4", markers=True),
              svg.Series("dashed", [1, 3], [0.2, 0.3], "#ff7f0e", dash=svg.DASHED)]
    text = svg.line_chart(series, svg.Axes(title="T <x>", xlabel="k", ylabel="y", xlim=(1, 3), ylim=(0, 1), xinteger=True),
                          vlines=[svg.VLine(2.5)], legend=[svg.LegendEntry("a<b>&c", "#1f77b4")])
    root = parse(text)  # well-formed XML despite the markup in labels
    assert root.get("viewBox") == "0 0 600 380"
    groups = root.findall(".//s:g[@class='series']", NS)
    assert [g.get("data-series") for g in groups] == ["a<b>&c", "dashed"]
    assert [len(g.find("s:polyline", NS).get("points").split()) for g in groups] == [3, 2]
    assert len(groups[0].findall("s:circle", NS)) == 3 and not groups[1].findall("s:circle", NS)
    assert groups[1].find("s:polyline", NS).get("stroke-dasharray") == svg.DASHED
    assert [v for v, _ in _ticks(root, "x")] == [1, 2, 3]
    assert [v for v, _ in _ticks(root, "y")] == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    (ref,) = root.findall(".//s:line[@class='refline']", NS)
    x_of = dict(_ticks(root, "x"))
    assert float(ref.get("x1")) == pytest.approx((x_of[2] + x_of[3]) / 2, abs=0.01)
    assert root.find(".//s:text[@class='title']", NS).text == "T <x>"
    assert [e.find("s:text", NS).text for e in root.iterfind(".//s:g[@class='legend-entry']", NS)] == ["a<b>&c"]


def test_line_chart_skips_non_finite_points():
    text = svg.line_chart([svg.Series("s", [1, 2, 3], [0.1, float("nan"), 0.3])],
                          svg.Axes(title="", xlabel="", ylabel="", xlim=(1, 3), ylim=(0, 1)))
    assert len(parse(text).find(".//s:polyline", NS).get("points").split()) == 2


def test_histogram_bars_follow_numpy_counts():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.7, 0.1, 500), rng.normal(0.4, 0.1, 80)
    bins = np.linspace(min(a.min(), b.min()), max(a.max(), b.max()), 31)
    root = parse(svg.histogram_chart([("a", a, "#2ca02c"), ("b", b, "#d62728"), ("none", [], "#000000")], bins,
                                     title="t", xlabel="x", ylabel="n", threshold=0.55))
    groups = root.findall(".//s:g[@class='series']", NS)
    assert [g.get("data-series") for g in groups] == ["a", "b"]  # an empty series draws nothing
    ys = dict(_ticks(root, "y"))
    per_count = (ys[0] - ys[max(ys)]) / max(ys)  # pixels per query, read off the axis
    for group, values in zip(groups, (a, b)):
        counts = np.histogram(values, bins)[0]
        heights = [float(r.get("height")) for r in group.iter("{http://www.w3.org/2000/svg}rect")]
        assert len(heights) == np.count_nonzero(counts)
        assert heights == pytest.approx(counts[counts > 0] * per_count, abs=0.02)
    assert all(v == int(v) for v in ys)  # counts get integer ticks
    labels = [e.find("s:text", NS).text for e in root.iterfind(".//s:g[@class='legend-entry']", NS)]
    assert labels == ["a (n=500)", "b (n=80)", "threshold 0.55"]
    assert len(root.findall(".//s:line[@class='refline']", NS)) == 1


def test_data_uri_round_trips():
    text = svg.line_chart([], svg.Axes(title="é", xlabel="", ylabel="", xlim=(0, 1), ylim=(0, 1)))
    uri = svg.data_uri(text)
    assert uri.startswith("data:image/svg+xml;base64,")
    assert base64.b64decode(uri.split(",", 1)[1]).decode("utf-8") == text
