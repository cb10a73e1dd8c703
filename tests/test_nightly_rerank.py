"""Nightly job files take re-ranking and expansion as the command line does: ``rerank``, ``query_expansion``
and ``database_augmentation`` keys, the per-query APs equal to the dense reference of re-ranking (the tests'
rerank_reference), bad values exit 2 naming the file's key."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid
from test_rerank import reference_rows

from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def run(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def job(path: Path, dataset: Path, extra: str) -> Path:
    path.write_text(f"""
reports = "{path.parent / 'reports'}"
history = "{path.parent / 'history'}"

[[evaluation]]
name = "reid"
dataset = "{dataset}"
protocol = "reid"
ks = [1, 5]
{extra}
""")
    return path


def test_nightly_reranks_as_the_dense_reference(tmp_path):
    arrays = random_reid(np.random.default_rng(7), n_query=60, n_gallery=400, n_ids=30, spread=0.8)
    ds.write_dataset(tmp_path / "data.zarr", arrays, {"protocol": "reid"})
    done = run("nightly", job(tmp_path / "job.toml", tmp_path / "data.zarr", 'rerank = "8,3,0.4"'),
               "--date", "2026-11-24", "--workers", "1")
    assert done.returncode == 0, done.stderr
    [per_query] = list((tmp_path / "reports").rglob("per_query.parquet"))
    got = pq.read_table(per_query).to_pylist()
    expected, _, _ = reference_rows(arrays, "reid", (8, 3, 0.4))
    assert [r["first_rank"] for r in got] == [r["first_rank"] for r in expected]
    for row, ref in zip(got, expected):
        assert row["ap"] == pytest.approx(ref["ap"], rel=1e-13, abs=0) if ref["ap"] is not None else row["ap"] is None


@pytest.mark.parametrize("extra,named", [
    ('rerank = "20,6"', "rerank: '20,6' is not k1,k2,lambda"),
    ("rerank = [20, 6, 1.5]", "rerank: lambda = 1.5"),
    ("rerank = 3", "rerank: 3 is not true"),
    ('query_expansion = "0,3"', "query_expansion: K = 0"),
    ("database_augmentation = [2, -1]", "database_augmentation: ALPHA = -1"),
    ("database_augmentation = 2", "database_augmentation: 2 is not"),
])
def test_bad_ranking_options_exit_2_naming_the_key(tmp_path, extra, named):
    arrays = random_reid(np.random.default_rng(1), n_query=10, n_gallery=50, n_ids=5)
    ds.write_dataset(tmp_path / "data.zarr", arrays, {"protocol": "reid"})
    done = run("nightly", job(tmp_path / "job.toml", tmp_path / "data.zarr", extra), "--date", "2026-11-24")
    assert done.returncode == 2
    assert named in done.stderr and "evaluation" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "reports").exists()
