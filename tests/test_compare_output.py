"""What a comparison shows a reader (issue 39, item 4): print(evalcore.compare(...)), a notebook's HTML, the
LaTeX table of compare --latex and the interval column of compare.html.

Real reports (evalcore.evaluate(...).save(...) on small synthetic ReID data, one planted worse run) compared by
evalcore.compare; every number shown is checked against comparison.parquet, the best cell of each column is
found here from those means and the registry's directions, the marks from the Holm p-values by their thresholds.
"""
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid

import evalcore
from evalcore.core import registry
from evalcore.render import compare as render

METRICS = ["map", "minp", "mrr", "hit@1", "recall@5"]
NAMES = ["good", "bad", "good2"]
FAST = dict(resamples=1000, permutations=2000, seed=0)


def _marks(p):
    """Significance marks by their definition (README, Compare): *** < 0.001, ** < 0.01, * < 0.05."""
    return "" if p != p else "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """good (noise 0.2), bad (noise 0.7: a planted drop), good2 (noise 0.2, another draw), saved as reports and
    compared by path with --latex; returns the Comparison, its folder and the LaTeX file."""
    root = tmp_path_factory.mktemp("compare_output")
    arrays = random_reid(np.random.default_rng(0), n_query=150, n_gallery=700)
    for name, noise, seed in (("good", 0.2, 1), ("bad", 0.7, 2), ("good2", 0.2, 3)):
        rng = np.random.default_rng(seed)
        query = (arrays["query/emb"] + noise * rng.standard_normal(arrays["query/emb"].shape)).astype(np.float32)
        evalcore.evaluate(query=query, gallery=arrays["gallery/emb"], query_labels=arrays["query/label"],
                          gallery_labels=arrays["gallery/label"], query_groups=arrays["query/group"]).save(root / name)
    comparison = evalcore.compare(*(root / n for n in NAMES), out=root / "cmp", latex=root / "table.tex",
                                  metrics=METRICS, **FAST)
    return comparison, root / "cmp", root / "table.tex"


def expected_means(folder):
    """{run: {metric: (mean, marks)}} of group all from comparison.parquet: the baseline's mean_baseline
    (unmarked), each run's mean_run with the marks of its p_holm; and the metrics in file order."""
    table = pq.read_table(folder / "comparison.parquet").to_pylist()
    out: dict = {n: {} for n in NAMES}
    metrics = list(dict.fromkeys(r["metric"] for r in table))
    for r in table:
        if r["group"] == "all":
            out[r["baseline"]][r["metric"]] = (r["mean_baseline"], "")
            out[r["run"]][r["metric"]] = (r["mean_run"], _marks(r["p_holm"]))
    return out, metrics


def best_by_direction(means, metrics):
    """{metric: set of runs} holding the best mean shown (4 decimals), higher or lower by the registry."""
    out = {}
    for m in metrics:
        shown = {run: round(means[run][m][0], 4) for run in NAMES}
        best = (min if registry.direction(m) == "lower" else max)(shown.values())
        out[m] = {run for run, v in shown.items() if v == best}
    return out


# --------------------------------------------------------------------------- print() and repr()


def test_str_is_a_short_table_of_every_run_and_metric_with_the_parquet_means(compared):
    comparison, folder, _ = compared
    means, metrics = expected_means(folder)
    assert len(metrics) == 5
    text = str(comparison)
    assert len(text.encode()) < 2000, len(text.encode())
    lines = text.splitlines()
    assert lines[0].split() == ["run", *(registry.label(m) for m in metrics)]
    rows = [line for line in lines if line.split() and line.split()[0] in NAMES]
    assert [r.split()[0] for r in rows] == NAMES  # the baseline first, then the runs in order
    for line in rows:
        run, cells = line.split()[0], line.split()[1:]
        assert len(cells) == len(metrics), line
        for m, cell in zip(metrics, cells):
            mean, mark = means[run][m]
            number = re.fullmatch(r"(\d\.\d{4})(\**)", cell)
            assert number, cell
            assert float(number.group(1)) == pytest.approx(mean, abs=5e-5) and number.group(2) == mark, (run, m)
    # the planted drop shows: bad's mAP is marked, and the note says what the marks are
    assert means["bad"]["map"][1] and "baseline good" in text and "Holm" in text


def test_repr_is_one_short_line_naming_the_runs(compared):
    comparison, _, _ = compared
    text = repr(comparison)
    assert "\n" not in text and len(text) < 200, text
    assert all(n in text for n in NAMES) and "pyarrow" not in text


# --------------------------------------------------------------------------- notebooks


class Cells(HTMLParser):
    """The rows of an HTML table: (text, bold) per cell."""

    def __init__(self):
        super().__init__()
        self.rows, self.tables, self.bold, self.cell = [], 0, False, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables += 1
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = ""
        elif tag == "b":
            self.bold = True

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append((self.cell.strip(), self.bold))
            self.cell, self.bold = None, False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def test_repr_html_is_a_table_of_the_means_with_the_best_in_bold(compared):
    comparison, folder, _ = compared
    means, metrics = expected_means(folder)
    best = best_by_direction(means, metrics)
    cells = Cells()
    cells.feed(comparison._repr_html_())
    assert cells.tables == 1
    head, *rows = cells.rows
    assert [t for t, _ in head] == ["run", *(registry.label(m) for m in metrics)]
    assert [r[0][0] for r in rows] == NAMES
    for row in rows:
        run = row[0][0]
        for m, (text, bold) in zip(metrics, row[1:]):
            mean, mark = means[run][m]
            assert text == f"{mean:.4f}{mark}" and bold == (run in best[m]), (run, m, text, bold)


# --------------------------------------------------------------------------- LaTeX


def latex_rows(tex):
    """The body rows of the tabular: cells split at &, without the row end."""
    body = tex.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
    return [[c.strip() for c in line.removesuffix("\\\\").strip().split("&")] for line in body.strip().splitlines()]


def check_structure(tex, n_columns):
    """Balanced braces, environments closed in order, every row as wide as the tabular's column spec."""
    depth = 0
    for c in re.sub(r"\\[{}%&_#$]", "", tex):
        depth += {"{": 1, "}": -1}.get(c, 0)
        assert depth >= 0
    assert depth == 0
    stack = []
    for kind, env in re.findall(r"\\(begin|end)\{(\w+)\}", tex):
        if kind == "begin":
            stack.append(env)
        else:
            assert stack.pop() == env
    assert not stack
    spec = re.search(r"\\begin\{tabular\}\{([lrc]+)\}", tex).group(1)
    assert len(spec) == n_columns
    for row in latex_rows(tex):
        assert len(row) == n_columns, row


def test_latex_has_the_packages_a_caption_the_best_in_bold_and_a_final_newline(compared):
    comparison, folder, tex_file = compared
    tex = tex_file.read_text()
    means, metrics = expected_means(folder)
    best = best_by_direction(means, metrics)
    assert tex.splitlines()[0] == r"% needs \usepackage{booktabs}"
    assert tex.endswith("\n") and not tex.endswith("\n\n")
    caption = re.search(r"\\caption\{(.*)\}\n", tex).group(1)
    for said in ("good", "bad", "good2", "baseline", "95\\%", "1000 resamples", "2000 sign flips", "Holm",
                 "$p<0.05$", "$p<0.001$", "Bold", "higher is better"):
        assert said in caption, said
    check_structure(tex, 1 + len(metrics))
    rows = latex_rows(tex)
    assert [r[0] for r in rows] == NAMES
    bold_seen = 0
    for row in rows:
        run = row[0]
        for m, cell in zip(metrics, row[1:]):
            mean, mark = means[run][m]
            found = re.fullmatch(r"(\\textbf\{)?(\d\.\d{4})\}?(\$\^\{(\*+)\}\$)?", cell)
            assert found, cell
            assert float(found.group(2)) == pytest.approx(mean, abs=5e-5) and (found.group(4) or "") == mark
            assert bool(found.group(1)) == (run in best[m]), (run, m, cell)
            bold_seen += bool(found.group(1))
    assert bold_seen >= len(metrics)


def test_latex_bold_follows_a_metric_where_lower_is_better(compared, monkeypatch):
    """The bold cell comes from the metric's direction: say mAP were lower-better, the lowest mAP is bold."""
    comparison, folder, _ = compared
    real = registry.direction
    monkeypatch.setattr(registry, "direction", lambda name: "lower" if name == "map" else real(name))
    means, metrics = expected_means(folder)
    lowest = min(NAMES, key=lambda run: means[run]["map"][0])
    assert lowest == "bad"
    tex = render.format_latex(comparison)
    column = metrics.index("map") + 1
    bold = [row[0] for row in latex_rows(tex) if row[column].startswith(r"\textbf")]
    assert bold == [lowest] and r"$\downarrow$ lower is better" in tex


@pytest.mark.parametrize("engine", ["pdflatex", "lualatex"])
def test_latex_compiles_with_the_packages_its_first_lines_name(compared, tmp_path, engine):
    """Only the packages the file's '% needs' lines name go in the preamble; the run names carry LaTeX's special
    characters."""
    if shutil.which(engine) is None:
        pytest.skip(f"{engine} is not installed")
    _, _, tex_file = compared
    root = tex_file.parent
    table = tmp_path / "table.tex"
    evalcore.compare(root / "good", root / "bad", root / "good2", names=["base_line", "50% worse #1", "a^b~{c}"],
                     latex=table, metrics=METRICS, **FAST)
    packages = re.findall(r"^% needs \\usepackage\{(\w+)\}$", table.read_text(), re.M)
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\n" + "".join(f"\\usepackage{{{p}}}\n"
                                                                          for p in packages)
                                      + "\\begin{document}\n\\input{table.tex}\n\\end{document}\n")
    done = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert (tmp_path / "doc.pdf").stat().st_size > 1000 and "Undefined control sequence" not in log


# --------------------------------------------------------------------------- compare.html's interval column


def scale_of(svg):
    """(value, x) of every labelled tick of a ci-scale SVG, and the x of its zero line."""
    ticks = []
    for x, text in re.findall(r'<text x="([\d.]+)"[^>]*>([^<]+)</text>', svg):
        ticks.append((float(text.replace("−", "-")), float(x)))
    zero = re.search(r'<line x1="([\d.]+)" y1="0" x2="[\d.]+" y2="\d+" stroke="#000" stroke-dasharray', svg)
    return ticks, float(zero.group(1))


def on_scale(ticks):
    """The pixel of a value on the line through the first and last ticks."""
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    return lambda v: x0 + (v - v0) * (x1 - x0) / (v1 - v0)


def test_compare_html_draws_the_interval_bars_on_a_labelled_scale(compared):
    """Each table's interval column has a scale: ticks labelled with differences, zero marked; each bar's ends
    and dot lie where that scale puts the row's ci_low, ci_high and diff (comparison.parquet)."""
    _, folder, _ = compared
    html = (folder / "compare.html").read_text()
    table = pq.read_table(folder / "comparison.parquet").to_pylist()
    sections = re.findall(r"<h3>(\w+) vs good: (\w+) \(\d+ queries\)</h3>(.*?)</table>", html, re.S)
    assert len(sections) == 2 * 4  # bad and good2, groups all + 3
    for run, group, section in sections:
        scales = re.findall(r'<svg class="ci-scale".*?</svg>', section, re.S)
        assert len(scales) == 1
        ticks, zero_x = scale_of(scales[0])
        values = [v for v, _ in ticks]
        assert 0.0 in values and min(values) < 0 < max(values) and len(ticks) >= 3
        assert values == sorted(values) and min(values) == -max(values)
        assert all(("+" in t) == (v > 0) for v, t in zip(values, re.findall(r">([^<]+)</text>", scales[0])))
        at = on_scale(ticks)
        for v, x in ticks:  # linear, zero on the dashed zero line
            assert x == pytest.approx(at(v), abs=0.11)
        assert zero_x == pytest.approx(at(0.0), abs=0.11)
        rows = [r for r in table if r["run"] == run and r["group"] == group]
        bars = re.findall(r'<svg class="ci".*?</svg>', section, re.S)
        assert len(bars) == len(rows) == len(METRICS)
        for r, bar in zip(rows, bars):
            line = re.search(r'<line x1="([-\d.]+)" y1="9" x2="([-\d.]+)" y2="9"', bar)
            dot = re.search(r'<circle cx="([-\d.]+)"', bar)
            assert float(line.group(1)) == pytest.approx(at(r["ci_low"]), abs=0.11)
            assert float(line.group(2)) == pytest.approx(at(r["ci_high"]), abs=0.11)
            assert float(dot.group(1)) == pytest.approx(at(r["diff"]), abs=0.11)
            assert min(values) <= r["ci_low"] <= r["diff"] <= r["ci_high"] <= max(values)
        for bar in bars:  # every bar's dashed zero line is the scale's zero
            assert float(re.search(r'<line x1="([\d.]+)" y1="0"', bar).group(1)) == pytest.approx(zero_x, abs=0.11)


def test_a_run_compared_with_itself_still_gets_a_scale(compared, tmp_path):
    _, folder, _ = compared
    root = folder.parent
    evalcore.compare(root / "good", root / "good", names=["a", "b"], out=tmp_path / "cmp", metrics=["map"], **FAST)
    html = (tmp_path / "cmp" / "compare.html").read_text()
    ticks, zero_x = scale_of(re.search(r'<svg class="ci-scale".*?</svg>', html, re.S).group(0))
    assert 0.0 in [v for v, _ in ticks] and len(ticks) >= 3
    dot = float(re.search(r'<svg class="ci".*?<circle cx="([\d.]+)"', html, re.S).group(1))
    assert dot == pytest.approx(zero_x, abs=0.11)
