"""``evalcore neighbors`` and ``evalcore.neighbors``: exact top-k against brute force, written to Parquet."""
from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid

import evalcore
from evalcore.cli.main import main
from evalcore.core.canonical import exact_score
from evalcore.errors import InputError


def unit_rows(x):
    x = np.asarray(x, dtype=np.float32)
    return x * (1.0 / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1))).astype(np.float32)[:, None]


def brute_top_k(query, gallery, k):
    """Every pair's exactly rounded score (math.fsum), a stable sort: highest first, lower index on ties."""
    q, g = unit_rows(query), unit_rows(gallery)
    s = np.array([[exact_score(a, b) for b in g] for a in q], dtype=np.float64)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(s, order, 1)


def test_command_writes_exact_neighbours(write, tmp_path):
    arrays = random_reid(np.random.default_rng(2), n_query=30, n_gallery=400, dims=12)
    arrays["gallery/emb"][200:260] = arrays["gallery/emb"][0:60]  # exact ties
    path = write(arrays, chunk_rows=16)
    out = tmp_path / "nn"
    assert main(["neighbors", str(path), "--k", "6", "--out", str(out), "--quiet"]) == 0
    table = pq.read_table(out / "neighbors.parquet").to_pylist()
    ids, scores = brute_top_k(arrays["query/emb"], arrays["gallery/emb"], 6)
    assert [r["item"] for r in table] == ids.reshape(-1).tolist()
    assert [r["score"] for r in table] == scores.reshape(-1).tolist()
    assert [r["rank"] for r in table[:6]] == [1, 2, 3, 4, 5, 6]
    assert table[0]["key"] == f"g{ids[0, 0]}"


def test_api_with_arrays():
    rng = np.random.default_rng(4)
    q, g = rng.standard_normal((9, 5)).astype(np.float32), rng.standard_normal((70, 5)).astype(np.float32)
    table = evalcore.neighbors(query=q, gallery=g, k=3)
    ids, _ = brute_top_k(q, g, 3)
    assert table.column("item").to_pylist() == ids.reshape(-1).tolist()


@pytest.mark.parametrize("k", ["0", "x", "1000"])
def test_bad_k_exits_2(write, tmp_path, capsys, k):
    path = write(random_reid(np.random.default_rng(2), n_query=5, n_gallery=50))
    assert main(["neighbors", str(path), "--k", k, "--out", str(tmp_path / "nn")]) == 2
    assert "--k" in capsys.readouterr().err
    assert not (tmp_path / "nn").exists()
    with pytest.raises(InputError):
        evalcore.neighbors(path, k=100)


def test_zarr_format_writes_exact_neighbour_arrays(write, tmp_path):
    """--format zarr: neighbors/item and neighbors/score as (Q, K) arrays, equal to brute force, ties included;
    --overwrite replaces that group, and a folder evalcore did not write is refused."""
    import zarr

    arrays = random_reid(np.random.default_rng(3), n_query=37, n_gallery=300, dims=10)
    arrays["gallery/emb"][150:190] = arrays["gallery/emb"][0:40]  # exact ties
    path = write(arrays, chunk_rows=16)
    out = tmp_path / "nn.zarr"
    assert main(["neighbors", str(path), "--k", "5", "--out", str(out), "--format", "zarr", "--quiet"]) == 0
    group = zarr.open_group(str(out), mode="r")
    ids, scores = brute_top_k(arrays["query/emb"], arrays["gallery/emb"], 5)
    assert group["neighbors/item"].dtype == np.int64 and group["neighbors/score"].dtype == np.float32
    assert np.array_equal(group["neighbors/item"][:], ids)
    assert group["neighbors/score"][:].astype(np.float64).tolist() == scores.tolist()
    assert group.attrs["evalcore"]["neighbors"]["k"] == 5
    assert main(["neighbors", str(path), "--k", "2", "--out", str(out), "--format", "zarr", "--quiet",
                 "--overwrite"]) == 0
    assert np.array_equal(zarr.open_group(str(out), mode="r")["neighbors/item"][:], ids[:, :2])
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    assert main(["neighbors", str(path), "--k", "2", "--out", str(foreign), "--format", "zarr", "--overwrite"]) == 2
    assert (foreign / "notes.txt").read_text() == "keep"


def test_zarr_format_bad_k_writes_nothing(write, tmp_path, capsys):
    path = write(random_reid(np.random.default_rng(2), n_query=5, n_gallery=50))
    out = tmp_path / "nn.zarr"
    assert main(["neighbors", str(path), "--k", "51", "--out", str(out), "--format", "zarr"]) == 2
    assert "--k" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [path]
