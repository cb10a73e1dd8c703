"""evaluate --ci: bootstrap intervals of every mean and CMC point, against scipy.stats.bootstrap, the same
numbers for any worker count and chunking, and bad levels refused before anything is written."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid
from scipy import stats

import evalcore

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


@pytest.fixture(scope="module")
def arrays():
    return random_reid(np.random.default_rng(4), n_query=260, n_gallery=1200)


def test_intervals_within_monte_carlo_error_of_scipy_per_group(arrays):
    r = evalcore.evaluate(query=arrays["query/emb"], gallery=arrays["gallery/emb"],
                          query_labels=arrays["query/label"], gallery_labels=arrays["gallery/label"],
                          query_groups=arrays["query/group"], ci=0.9, resamples=20_000, seed=1)
    pq_ = r.per_query
    known = np.asarray(pq_.column("n_relevant").to_pylist()) > 0
    group = np.asarray(pq_.column("group").to_pylist(), dtype=object)
    for row in r.summary.to_pylist():
        sel = known & ((group == row["group"]) if row["group"] != "all" else True)
        for summary, column in (("map", "ap"), ("minp", "inp"), ("recall_at_5", "recall_at_5")):
            values = np.asarray(pq_.column(column).to_pylist(), float)[sel]
            ref = stats.bootstrap((values,), np.mean, confidence_level=0.9, method="percentile", n_resamples=20_000,
                                  random_state=np.random.default_rng(7)).confidence_interval
            width = ref.high - ref.low
            assert row[f"{summary}_ci_low"] < row[summary] < row[f"{summary}_ci_high"]
            assert abs(row[f"{summary}_ci_low"] - ref.low) < 0.05 * width, (row["group"], summary)
            assert abs(row[f"{summary}_ci_high"] - ref.high) < 0.05 * width, (row["group"], summary)
    # a CMC point is the mean of hit@k: its band is the same resamples' interval of hit_at_k
    cmc = r.cmc.to_pylist()
    for row in r.summary.to_pylist():
        for k in (1, 5, 10):
            point = next(c for c in cmc if c["group"] == row["group"] and c["k"] == k)
            assert (point["ci_low"], point["ci_high"]) == (row[f"hit_at_{k}_ci_low"], row[f"hit_at_{k}_ci_high"])
    assert r.run["intervals"]["level"] == 0.9 and r.run["intervals"]["resamples"] == 20_000


def test_same_seed_same_numbers_for_any_workers_and_chunking(arrays, write):
    path = write(arrays, chunk_rows=37)
    one = evalcore.evaluate(path, ci=0.95, resamples=3000, seed=5, workers=None, chunk_rows=37)
    two = evalcore.evaluate(path, ci=0.95, resamples=3000, seed=5, workers=2, chunk_rows=100)
    assert one.summary.equals(two.summary) and one.cmc.equals(two.cmc)
    other = evalcore.evaluate(path, ci=0.95, resamples=3000, seed=6)
    assert other.summary.column("map").equals(one.summary.column("map"))
    assert not other.summary.column("map_ci_low").equals(one.summary.column("map_ci_low"))


def test_command_line_writes_intervals_and_prints_them(arrays, write, tmp_path):
    path = write(arrays)
    out = tmp_path / "rep"
    p = cli("evaluate", path, "--out", out, "--ci", "0.95", "--resamples", "500", "--seed", "2")
    assert p.returncode == 0, p.stderr
    summary = pq.read_table(out / "summary.parquet")
    assert {"map_ci_low", "map_ci_high", "hit_at_1_ci_low"} <= set(summary.column_names)
    assert {"ci_low", "ci_high"} <= set(pq.read_table(out / "cmc.parquet").column_names)
    run = json.loads((out / "run.json").read_text())
    assert (run["intervals"]["level"], run["intervals"]["resamples"], run["intervals"]["seed"]) == (0.95, 500, 2)
    assert "Bootstrap intervals" in p.stdout and "Confidence intervals" in (out / "report.html").read_text()
    plain = tmp_path / "plain"
    assert cli("evaluate", path, "--out", plain).returncode == 0
    assert not any(c.endswith("_ci_low") for c in pq.read_table(plain / "summary.parquet").column_names)
    assert "ci" not in json.loads((plain / "run.json").read_text())["options"]


@pytest.mark.parametrize("args,says", [(["--ci", "1.5"], "--ci: 1.5"), (["--ci", "0"], "--ci: 0.0"),
                                       (["--ci", "0.9", "--resamples", "0"], "--resamples: 0")])
def test_bad_levels_exit_2_and_write_nothing(arrays, write, tmp_path, args, says):
    path = write(arrays)
    out = tmp_path / "rep"
    p = cli("evaluate", path, "--out", out, *args)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


def test_api_names_the_parameter(arrays):
    with pytest.raises(evalcore.InputError, match=r"^ci: 1\.0 must"):
        evalcore.evaluate(query=arrays["query/emb"], gallery=arrays["gallery/emb"],
                          query_labels=arrays["query/label"], gallery_labels=arrays["gallery/label"], ci=1.0)
