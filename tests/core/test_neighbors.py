"""Exact top-k search (core/scan/neighbors.py) against brute force: every canonical score, argsort with §4's rule."""
from __future__ import annotations

import numpy as np
import pytest

from evalcore.core.canonical import exact_score
from evalcore.core.scan.embeddings import normalize_rows
from evalcore.core.scan.neighbors import ArrayColumns, search


def brute(rows: np.ndarray, cols: np.ndarray, k: int):
    """Every pair's canonical score by an exact sum (math.fsum), then a stable sort: highest first, lower id
    first among ties; the farthest is the lowest score, lower id first."""
    s = np.array([[exact_score(r, c) for c in cols] for r in rows], dtype=np.float64)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    far = np.argsort(s, axis=1, kind="stable")[:, 0]
    return order, np.take_along_axis(s, order, 1), far, s[np.arange(len(rows)), far]


def clustered(seed: int, n: int, d: int, centres: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, d))
    return (c[rng.integers(0, centres, n)] + 0.3 * rng.standard_normal((n, d))).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 3])
def test_top_k_and_farthest_equal_brute_force(threads):
    from concurrent.futures import ThreadPoolExecutor

    cols = normalize_rows(clustered(1, 9000, 24), "cosine")  # three column tiles, the last one short
    rows = cols[::37]
    with ThreadPoolExecutor(3) as pool:
        got = search(rows, 0, ArrayColumns(cols, block_rows=4096), 7, threads=threads, map_fn=pool.map)
    ids, scores, far, far_s = brute(rows, cols, 7)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_array_equal(got.scores.astype(np.float64), scores)
    np.testing.assert_array_equal(got.far_ids, far)
    np.testing.assert_array_equal(got.far_scores.astype(np.float64), far_s)


def test_exact_ties_go_to_the_lower_index():
    rng = np.random.default_rng(3)
    base = normalize_rows(rng.standard_normal((40, 8)).astype(np.float32), "cosine")
    cols = np.concatenate([base, base[::-1], base[:5]])  # every row at least twice: exact ties everywhere
    rows = cols[[0, 3, 45, 81]]
    got = search(rows, 0, ArrayColumns(cols, block_rows=32), 5)
    ids, scores, far, far_s = brute(rows, cols, 5)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_array_equal(got.scores.astype(np.float64), scores)
    np.testing.assert_array_equal(got.far_ids, far)
    # the row itself and its copies lead, lowest index first
    assert got.ids[2][:2].tolist() == sorted(got.ids[2][:2].tolist())


def test_constant_rows_keep_index_order():
    cols = normalize_rows(np.ones((300, 16), np.float32), "cosine")
    got = search(cols[:3], 0, ArrayColumns(cols, block_rows=64), 4)
    assert got.ids.tolist() == [[0, 1, 2, 3]] * 3
    assert got.far_ids.tolist() == [0, 0, 0]
