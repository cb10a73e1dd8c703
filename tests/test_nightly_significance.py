"""Nightly gates with ``significance``: a drop beyond the tolerance that is noise passes, a real one fails;
gates.json records the difference, its interval and the p-values (planted effects, real runs)."""
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

from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def run(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """base; ``noise``: 4 queries moved far away (a small drop of mAP, on too few queries to be
    significant); ``drop``: every query embedding disturbed (a real drop)."""
    root = tmp_path_factory.mktemp("sig-data")
    data = random_reid(np.random.default_rng(3), n_query=240, n_gallery=1500, dims=16, n_ids=40)
    ds.write_dataset(root / "base.zarr", data, {"protocol": "reid"})
    rng = np.random.default_rng(4)
    noise = dict(data)
    emb = data["query/emb"].copy()
    known = np.flatnonzero(data["query/label"] < 40)[:4]
    emb[known] = rng.standard_normal((4, emb.shape[1])).astype(np.float32) * 3
    noise["query/emb"] = emb
    ds.write_dataset(root / "noise.zarr", noise, {"protocol": "reid"})
    drop = dict(data)
    drop["query/emb"] = (data["query/emb"] + 0.9 * rng.standard_normal(emb.shape)).astype(np.float32)
    ds.write_dataset(root / "drop.zarr", drop, {"protocol": "reid"})
    return root


def job(path: Path, dataset: Path, root: Path) -> Path:
    path.write_text(f"""
reports = "{root / 'reports'}"
history = "{root / 'history'}"

[[evaluation]]
name = "reid"
dataset = "{dataset}"
protocol = "reid"
ks = [1, 5]

[gates.map]
max_drop_previous = 0.0
significance = 0.05
""")
    return path


def gate(root: Path, date: str) -> dict:
    return next(c for c in json.loads((root / "reports" / date / "gates.json").read_text())["checks"]
                if c["metric"] == "map")


def test_noise_passes_a_real_drop_fails(datasets, tmp_path):
    assert run("nightly", job(tmp_path / "a.toml", datasets / "base.zarr", tmp_path), "--date",
               "2025-01-01").returncode == 0
    kept = pq.read_table(tmp_path / "history" / "reid" / "per_query" / "2025-01-01.parquet")
    assert {"key", "ap"} <= set(kept.column_names)

    p = run("nightly", job(tmp_path / "b.toml", datasets / "noise.zarr", tmp_path), "--date", "2025-01-02")
    assert p.returncode == 0, p.stderr
    check = gate(tmp_path, "2025-01-02")
    assert check["drop"] > 0 and check["passed"] is True and "not significant" in check["message"]
    assert check["p_randomization"] >= 0.05 and check["ci_low"] <= check["diff"] <= check["ci_high"]

    # the reference: the per-query AP of the two reports joined by key, and scipy's paired t-test
    old = pq.read_table(tmp_path / "reports" / "2025-01-01" / "reid" / "per_query.parquet").to_pylist()
    new = {r["key"]: r["ap"] for r in pq.read_table(tmp_path / "reports" / "2025-01-02" / "reid" /
                                                     "per_query.parquet").to_pylist() if r["n_relevant"] > 0}
    pairs = [(r["ap"], new[r["key"]]) for r in old if r["n_relevant"] > 0]
    a, b = np.array(pairs).T
    assert check["diff"] == pytest.approx((b - a).mean(), abs=1e-12) and check["n"] == len(pairs)
    assert check["p_ttest"] == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-9)

    p = run("nightly", job(tmp_path / "c.toml", datasets / "drop.zarr", tmp_path), "--date", "2025-01-03")
    assert p.returncode == 3, p.stderr
    check = gate(tmp_path, "2025-01-03")
    assert check["passed"] is False and check["p_randomization"] < 0.05 and check["ci_high"] < 0
    assert "gate failed" in p.stderr and "p = " in p.stderr


def test_significance_must_be_a_level_with_max_drop_previous(datasets, tmp_path):
    path = job(tmp_path / "j.toml", datasets / "base.zarr", tmp_path)
    path.write_text(path.read_text().replace("significance = 0.05", "significance = 5"))
    p = run("nightly", path, "--date", "2025-01-01")
    assert p.returncode == 2 and "gates.map.significance: 5" in p.stderr
    path.write_text(path.read_text().replace("significance = 5", "significance = 0.05")
                    .replace("max_drop_previous", "max_drop_baseline"))
    p = run("nightly", path, "--date", "2025-01-01")
    assert p.returncode == 2 and "give max_drop_previous too" in p.stderr
    assert not (tmp_path / "reports").exists()
