"""evalcore compare / evalcore.compare end to end: real reports (Parquet), pairing by key, planted effects,
the output folder, and bad input (exit 2, one line naming it, nothing written).

References are written here: the paired difference from the two per-query tables joined by key by hand,
scipy.stats.ttest_rel on those values, and Holm's step-down procedure.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid
from scipy import stats

import evalcore
from evalcore.core.comparison import COLUMNS

CLI = [str(Path(sys.executable).with_name("evalcore"))]
FAST = dict(resamples=2000, permutations=2000)


def cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def run_with_noise(arrays, noise, seed, **options):
    """The same queries and gallery, the query embeddings disturbed by ``noise``: a worse model when larger."""
    rng = np.random.default_rng(seed)
    query = (arrays["query/emb"] + noise * rng.standard_normal(arrays["query/emb"].shape)).astype(np.float32)
    return evalcore.evaluate(query=query, gallery=arrays["gallery/emb"], query_labels=arrays["query/label"],
                             gallery_labels=arrays["gallery/label"], query_groups=arrays["query/group"], **options)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Reports good (noise 0.2), bad (noise 0.7, a planted drop) and good2 (noise 0.2 again, another draw)."""
    root = tmp_path_factory.mktemp("reports")
    arrays = random_reid(np.random.default_rng(0), n_query=240, n_gallery=1200)
    out = {}
    for name, noise, seed in (("good", 0.2, 1), ("bad", 0.7, 2), ("good2", 0.2, 3)):
        result = run_with_noise(arrays, noise, seed)
        result.save(root / name)
        out[name] = (root / name, result)
    out["arrays"] = arrays
    return out


def by_key(result, column):
    t = result.per_query
    known = np.asarray(t.column("n_relevant").to_pylist()) > 0
    return {k: v for k, v, ok in zip(t.column("key").to_pylist(), t.column(column).to_pylist(), known) if ok}


def test_a_run_compared_with_itself_differs_by_zero_with_p_one(reports):
    good = reports["good"][1]
    result = evalcore.compare(good, good, **FAST)
    assert result.rows
    for row in result.rows:
        r = row.result
        assert (r.diff, r.ci_low, r.ci_high) == (0.0, 0.0, 0.0), row.metric
        assert r.p_randomization == 1.0 and r.p_ttest == 1.0 and row.p_holm == 1.0
        assert r.wins == 0 and r.losses == 0 and r.ties == r.n


def test_a_planted_drop_is_significant_and_equals_the_hand_joined_difference(reports):
    good, bad = reports["good"][1], reports["bad"][1]
    result = evalcore.compare(reports["good"][0], reports["bad"][0], **FAST)
    rows = {(r.group, r.metric): r for r in result.rows}
    a, b = by_key(good, "ap"), by_key(bad, "ap")
    keys = sorted(a)
    d = np.array([b[k] - a[k] for k in keys])
    m = rows[("all", "map")]
    assert m.result.n == len(keys)
    assert m.result.diff == pytest.approx(d.mean(), abs=1e-12)
    assert m.result.mean_baseline == pytest.approx(np.mean([a[k] for k in keys]), abs=1e-12)
    assert m.result.ci_low < m.result.diff < m.result.ci_high < 0
    assert m.result.p_ttest == pytest.approx(stats.ttest_rel([b[k] for k in keys], [a[k] for k in keys]).pvalue,
                                             rel=1e-9)
    assert m.p_holm < 0.05 and m.result.p_randomization < 0.01
    assert (m.result.wins, m.result.ties, m.result.losses) == (int((d > 0).sum()), int((d == 0).sum()),
                                                               int((d < 0).sum()))
    # every query/group row is there, over that group's queries only
    groups = sorted(set(reports["arrays"]["query/group"]))
    assert sorted({g for g, _ in rows} - {"all"}) == groups
    assert sum(rows[(g, "map")].result.n for g in groups) == len(keys)


def test_holm_is_the_step_down_procedure_over_every_row(reports):
    result = evalcore.compare(reports["good"][0], reports["bad"][0], reports["good2"][0], **FAST)
    p = [r.result.p_randomization for r in result.rows]
    order = sorted(range(len(p)), key=lambda i: p[i])
    running, expected = 0.0, [0.0] * len(p)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        expected[i] = running
    assert [r.p_holm for r in result.rows] == pytest.approx(expected, abs=1e-15)
    assert {r.run for r in result.rows} == {"bad", "good2"} and {r.baseline for r in result.rows} == {"good"}


def test_the_command_writes_the_comparison_folder_and_prints_marks(reports, tmp_path):
    out, tex = tmp_path / "cmp", tmp_path / "table.tex"
    p = cli("compare", reports["good"][0], reports["bad"][0], "--out", out, "--resamples", 1000,
            "--permutations", 1000, "--seed", 3, "--latex", tex, "--metrics", "map,hit@1")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["compare.html", "comparison.json", "comparison.parquet", "manifest.json",
                                       "per_query_diff.parquet"]
    table = pq.read_table(out / "comparison.parquet")
    assert tuple(table.column_names) == COLUMNS
    assert set(table.column("metric").to_pylist()) == {"map", "hit_at_1"}
    record = json.loads((out / "comparison.json").read_text())
    assert (record["level"], record["resamples"], record["permutations"], record["seed"]) == (0.95, 1000, 1000, 3)
    diff = pq.read_table(out / "per_query_diff.parquet")
    assert {"key", "top1_key_baseline", "top1_key_run", "ap_baseline", "ap_run", "ap_diff"} <= set(diff.column_names)
    line = next(x for x in p.stdout.splitlines() if x.startswith("bad") and "mAP" in x)
    assert line.rstrip().split()[-2] in ("*", "**", "***")
    assert r"\begin{tabular}" in tex.read_text() and "$^{" in tex.read_text()
    html = (out / "compare.html").read_text()
    assert html.count('<svg class="ci"') == 2 * 4 and "most lost" in html and "CMC" in html
    # the same seed gives the same numbers
    again = evalcore.compare(reports["good"][0], reports["bad"][0], resamples=1000, permutations=1000, seed=3,
                             metrics=["map", "hit@1"])
    assert again.table().equals(table)


def test_different_options_warn_naming_them(reports):
    arrays = reports["arrays"]
    optimistic = run_with_noise(arrays, 0.2, 1, ties="optimistic", ks=(1, 5))
    result = evalcore.compare(reports["good"][1], optimistic, **FAST)
    assert len(result.warnings) == 1 and "ties" in result.warnings[0] and "ks" in result.warnings[0]


def test_disjoint_query_sets_are_refused_unless_intersect(reports, tmp_path):
    arrays = dict(reports["arrays"])
    keep = np.arange(len(arrays["query/label"])) >= 10
    fewer = evalcore.evaluate(query=arrays["query/emb"][keep], gallery=arrays["gallery/emb"],
                              query_labels=arrays["query/label"][keep], gallery_labels=arrays["gallery/label"],
                              query_keys=[f"q{i}" for i in np.flatnonzero(keep)])
    fewer.save(tmp_path / "fewer")
    out = tmp_path / "cmp"
    p = cli("compare", reports["good"][0], tmp_path / "fewer", "--out", out)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    n_good = len(by_key(reports["good"][1], "ap"))
    n_fewer = len(by_key(fewer, "ap"))
    assert f"{n_fewer} and {n_good} known queries" in p.stderr and "in good only" in p.stderr
    assert not out.exists()
    p = cli("compare", reports["good"][0], tmp_path / "fewer", "--out", out, "--intersect", "--resamples", 500,
            "--permutations", 500)
    assert p.returncode == 0, p.stderr
    assert pq.read_table(out / "comparison.parquet").column("n").to_pylist()[0] == n_fewer


@pytest.mark.parametrize("args,says", [
    (["--ci", "1.5"], "--ci: 1.5 must be a confidence level"),
    (["--ci", "0"], "--ci: 0.0 must be a confidence level"),
    (["--resamples", "0"], "--resamples: 0 must be a positive integer"),
    (["--permutations", "-3"], "--permutations: -3 must be a positive integer"),
    (["--metrics", "nope"], "--metrics: unknown metric 'nope'"),
])
def test_bad_options_exit_2_naming_them_and_write_nothing(reports, tmp_path, args, says):
    out, tex = tmp_path / "cmp", tmp_path / "t.tex"
    p = cli("compare", reports["good"][0], reports["bad"][0], "--out", out, "--latex", tex, *args)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr
    assert not out.exists() and not tex.exists()


def test_a_folder_that_is_not_a_report_exits_2_naming_it(reports, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    out = tmp_path / "cmp"
    p = cli("compare", reports["good"][0], tmp_path / "notes", "--out", out)
    assert p.returncode == 2 and "notes" in p.stderr and "manifest" in p.stderr
    assert not out.exists()
    p = cli("compare", reports["good"][0], "--out", out)
    assert p.returncode == 2 and "at least two runs" in p.stderr
    evalcore.compare(reports["good"][0], reports["bad"][0], out=tmp_path / "done", resamples=50, permutations=50)
    p = cli("compare", reports["good"][0], tmp_path / "done", "--out", out)
    assert p.returncode == 2 and "is a comparison folder" in p.stderr and not out.exists()


def test_an_existing_comparison_is_kept_unless_overwrite(reports, tmp_path):
    out = tmp_path / "cmp"
    assert cli("compare", reports["good"][0], reports["bad"][0], "--out", out, "--resamples", 200,
               "--permutations", 200).returncode == 0
    before = (out / "comparison.parquet").read_bytes()
    p = cli("compare", reports["good"][0], reports["good2"][0], "--out", out)
    assert p.returncode == 2 and "--overwrite" in p.stderr
    assert (out / "comparison.parquet").read_bytes() == before
    p = cli("compare", reports["good"][0], reports["good2"][0], "--out", out, "--overwrite", "--resamples", 200,
            "--permutations", 200)
    assert p.returncode == 0, p.stderr
    assert pq.read_table(out / "comparison.parquet").column("run").to_pylist()[0] == "good2"


def test_cmc_of_both_runs_on_the_paired_queries(reports, tmp_path):
    result = evalcore.compare(reports["good"][0], reports["bad"][0], out=tmp_path / "cmp", **FAST)
    bands = result.cmc.to_pylist()
    for name in ("good", "bad"):
        first = by_key(reports[name][1], "first_rank")
        for k in (1, 5, 10):
            (row,) = [b for b in bands if b["run"] == name and b["k"] == k]
            # CMC(k) = the share of paired known queries whose first relevant rank is <= k
            assert row["cmc"] == pytest.approx(np.mean([r is not None and r <= k for r in first.values()]))
            assert row["ci_low"] <= row["cmc"] <= row["ci_high"]
    html = (tmp_path / "cmp" / "compare.html").read_text()
    charts = [base64.b64decode(u).decode() for u in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]
    (cmc,) = [c for c in charts if "CMC with bootstrap bands" in c]
    assert cmc.count('class="band"') == 2 and cmc.count("<polyline") == 2


def test_bench_compare_prints_both_timings(tmp_path):
    p = cli("bench", "--compare", "--queries", 3000, "--resamples", 300, "--permutations", 300, "--repeat", 2,
            "--scipy-resamples", 50)
    assert p.returncode == 0, p.stderr
    from evalcore.core import registry
    from evalcore.jobs.bench_compare import KS, METRICS

    columns = [c for c in registry.run_columns(METRICS, KS, None) if c.summary is not None]
    assert len(columns) >= 12  # the "every metric (>= 12 columns)"
    assert f"3,000 paired queries x {len(columns)} metric columns" in p.stdout and "median" in p.stdout
    assert "scipy.stats.bootstrap + permutation_test" in p.stdout and "faster than scipy" in p.stdout
    p = cli("bench", "--resamples", 10)
    assert p.returncode == 2 and "--resamples: only with --compare" in p.stderr


def test_compare_page_renders_in_chromium(reports, tmp_path):
    """A screenshot of compare.html at 1300 px wide, where Debian's chromium is installed."""
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed")
    evalcore.compare(reports["good"][0], reports["bad"][0], out=tmp_path / "cmp", **FAST)
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1300,2000",
                    (tmp_path / "cmp" / "compare.html").as_uri()], capture_output=True, timeout=90, check=False)
    assert shot.is_file() and shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000


def test_two_demo_datasets_of_planted_quality_differ_significantly(tmp_path):
    """The demo's generator (jobs/synthetic.py) at one seed and two separations: the same queries and keys,
    matches 4 and 3 standard deviations above the crowd. Evaluated by the command, compared by the command."""
    from evalcore.jobs import synthetic

    for name, separation in (("sharp", 4.0), ("blurred", 3.0)):
        synthetic.write_clustered(tmp_path / f"{name}.zarr", synthetic.Clusters(
            n_query=300, n_gallery=3000, dims=32, n_ids=80, separation=separation, unknown=0.05), seed=5)
        assert cli("evaluate", tmp_path / f"{name}.zarr", "--out", tmp_path / name, "--quiet").returncode == 0
    p = cli("compare", tmp_path / "sharp", tmp_path / "blurred", "--out", tmp_path / "cmp", "--resamples", 2000,
            "--permutations", 2000)
    assert p.returncode == 0, p.stderr
    rows = {r["metric"]: r for r in pq.read_table(tmp_path / "cmp" / "comparison.parquet").to_pylist()}
    assert rows["map"]["diff"] < 0 and rows["map"]["ci_high"] < 0 and rows["map"]["p_holm"] < 0.05
    assert rows["map"]["losses"] > rows["map"]["wins"]
