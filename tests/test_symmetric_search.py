"""The symmetric neighbour search (each product tile serves its rows and its columns) finds exactly the lists
of the one-sided search, and both equal a brute-force reference on exact dot products (math.fsum), ties to
the lower id, on data with duplicate rows, near-duplicates and many row ranges."""
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from evalcore.core.scan.base import TILE_COLS
from evalcore.core.scan.neighbors import ArrayColumns, search, symmetric_search


def unit_rows(n, dims, seed, duplicates=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((max(2, n // 30), dims))
    x = centers[rng.integers(0, len(centers), n)] + 0.4 * rng.standard_normal((n, dims))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    if duplicates:  # exact copies and 1-ulp neighbours of earlier rows, spread over the ranges
        at = rng.choice(np.arange(1, n), duplicates, replace=False)
        x[at] = x[rng.integers(0, n, duplicates) % np.maximum(at, 1)]
        x[at[::2], 0] = np.nextafter(x[at[::2], 0], np.float32(2))
    return x


def brute_force(x, k):
    """Per row: the k columns of highest exact score (fsum of float64 products, rounded to float32), ties to the
    lower id, and the column of lowest score (ties to the lower id)."""
    x64 = x.astype(np.float64)
    ids, far = [], []
    for i in range(len(x)):
        s = np.array([np.float32(math.fsum(x64[i] * x64[j])) for j in range(len(x))])
        order = np.lexsort((np.arange(len(x)), -s.astype(np.float64)))
        ids.append(order[:k])
        far.append(np.lexsort((np.arange(len(x)), s.astype(np.float64)))[0])
    return np.array(ids), np.array(far)


@pytest.mark.parametrize("n,dims,k,size,duplicates", [(300, 24, 7, 64, 40), (257, 9, 21, 100, 0),
                                                       (90, 16, 30, 17, 20)])
def test_symmetric_equals_one_sided_and_brute_force(n, dims, k, size, duplicates):
    x = unit_rows(n, dims, seed=n, duplicates=duplicates)
    with ThreadPoolExecutor(2) as pool:
        got = symmetric_search(x, k, size, pool.map)
    one = search(x, 0, ArrayColumns(x), k)
    assert np.array_equal(got.ids, one.ids) and np.array_equal(got.scores, one.scores)
    assert np.array_equal(got.far_ids, one.far_ids) and np.array_equal(got.far_scores, one.far_scores)
    ids, far = brute_force(x, k)
    assert np.array_equal(got.ids, ids)
    assert np.array_equal(got.far_ids, far)


def test_symmetric_across_column_tiles_and_a_constant_block():
    """More rows than one column tile (the mirrored pairs of a task span tiles), and a run of identical rows
    that straddles two row ranges: every tie resolved to the lower id, as the one-sided search does."""
    n = TILE_COLS + 300
    x = unit_rows(n, 8, seed=5)
    x[1000:1600] = x[999]
    got = symmetric_search(x, 12, 1024)
    one = search(x, 0, ArrayColumns(x), 12)
    assert np.array_equal(got.ids, one.ids) and np.array_equal(got.scores, one.scores)
    assert np.array_equal(got.far_ids, one.far_ids) and np.array_equal(got.far_scores, one.far_scores)
    assert list(got.ids[1200, :12]) == list(range(999, 1011))


def test_engine_takes_the_one_sided_search_past_the_memory_budget(monkeypatch):
    """engine.rerank's search: symmetric within MIRRORED_BYTES, one-sided beyond; the same lists either way."""
    from evalcore.engine import rerank as engine_rerank

    x = unit_rows(700, 12, seed=9, duplicates=30)
    monkeypatch.setattr(engine_rerank, "SEARCH_ROWS", 128)
    assert engine_rerank.symmetric_fits(len(x), 21, 128)
    both = engine_rerank.nearest_here(x, 21)[0]
    monkeypatch.setattr(engine_rerank, "MIRRORED_BYTES", 0)
    assert not engine_rerank.symmetric_fits(len(x), 21, 128)
    one = engine_rerank.nearest_here(x, 21)[0]
    assert np.array_equal(both.ids, one.ids) and np.array_equal(both.scores, one.scores)
    assert np.array_equal(both.far_ids, one.far_ids)
