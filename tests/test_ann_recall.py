"""Exact recall@k of an approximate neighbour list (evalcore.ann_recall), issue 38 / CONTRACT §18.

References written here: a float64 brute force of the canonical scores, and
big-ann-benchmarks' knn recall with distance ties re-implemented from its
definition (harsha-simhadri/big-ann-benchmarks, benchmark/plotting/metrics.py,
``get_recall_values`` / ``compute_recall_with_distance_ties``: the ground
truth cut where its distances stop equalling the k-th, within 1e-6, the set
intersection with the run's ids, divided by k).
"""
from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest

import evalcore


def canonical_rows(x: np.ndarray) -> np.ndarray:
    """x * float32(1 / ||x||), the norm summed in float64 (the contract's cosine normalisation)."""
    x = x.astype(np.float32)
    norms = np.sqrt((x.astype(np.float64) ** 2).sum(axis=1))
    return x * (1.0 / norms).astype(np.float32)[:, None]


def brute_scores(query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
    """Canonical cosine scores by one float64 product rounded to float32 (exact sums of D=16 products of
    float32 numbers lie far inside float64's precision, so the rounding is the exact one)."""
    return (canonical_rows(query).astype(np.float64) @ canonical_rows(gallery).astype(np.float64).T).astype(np.float32)


def planted(seed: int, q: int = 40, distinct: int = 50, d: int = 16):
    """A gallery of ``distinct`` rows each repeated 1..5 times and shuffled, so k-th scores are often tied."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((distinct, d)).astype(np.float32)
    gallery = base[rng.permutation(np.repeat(np.arange(distinct), rng.integers(1, 6, distinct)))]
    query = rng.standard_normal((q, d)).astype(np.float32)
    return query, gallery, rng


def ann_lists(scores: np.ndarray, k: int, rng) -> np.ndarray:
    """Approximate lists: mostly items at or above the k-th score (tied copies the exact list left out
    among them), some far items, some duplicates and empty slots."""
    out = np.empty((len(scores), k), dtype=np.int64)
    for i, row in enumerate(scores):
        kth = np.sort(row)[::-1][k - 1]
        good = np.flatnonzero(row >= kth)
        pick = list(rng.choice(good, size=min(k, len(good)), replace=False))
        for j in range(k):
            r = rng.random()
            if r < 0.2:
                pick[j] = int(rng.integers(0, len(row)))
            elif r < 0.25:
                pick[j] = -1
            elif r < 0.3 and j:
                pick[j] = pick[j - 1]
        out[i] = pick[:k]
    return out


def brute_recall(ann: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    out = []
    for row, ids in zip(scores, ann):
        kth = np.sort(row.astype(np.float64))[::-1][k - 1]
        hits = {int(j) for j in ids if j >= 0 and row[j] >= kth}
        out.append(len(hits) / k)
    return np.array(out)


def big_ann_recall(true_ids: np.ndarray, true_dists: np.ndarray, run_ids: np.ndarray, count: int) -> np.ndarray:
    """big-ann-benchmarks' get_recall_values(count_ties=True) per-query values, from its definition."""
    out = []
    for t_ids, t_d, r_ids in zip(true_ids, true_dists, run_ids):
        if len(t_d) == count:
            end = count
        else:
            end = len(t_d)
            for i in range(count, len(t_d)):
                if not abs(t_d[count - 1] - t_d[i]) < 1e-6:
                    end = i
                    break
        out.append(len(set(t_ids[:end].tolist()) & set(r_ids.tolist())) / count)
    return np.array(out)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 5, 10])
def test_equal_to_a_float64_brute_force_with_planted_ties(seed, k):
    query, gallery, rng = planted(seed)
    scores = brute_scores(query, gallery)
    ann = ann_lists(scores, k, rng)
    r = evalcore.ann_recall(ann, query=query, gallery=gallery, k=k)
    expected = brute_recall(ann, scores, k)
    np.testing.assert_array_equal(r.per_query, expected)
    assert r.recall == pytest.approx(expected.mean(), rel=1e-12)


def test_the_planted_ties_matter():
    # a tied copy of the k-th item that the exact list left out is a hit; counting only the exact ids misses it
    query, gallery, rng = planted(1)
    k = 5
    exact = evalcore.neighbors(query=query, gallery=gallery, k=k).column("item").to_numpy().reshape(-1, k)
    scores = brute_scores(query, gallery)
    swapped = exact.copy()
    changed = 0
    for i, row in enumerate(scores):
        tied = [j for j in np.flatnonzero(row == row[exact[i, k - 1]]) if j not in exact[i]]
        if tied:
            swapped[i, k - 1] = tied[0]
            changed += 1
    assert changed > 5
    assert evalcore.ann_recall(swapped, query=query, gallery=gallery, k=k).recall == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_equal_to_big_ann_benchmarks_definition(seed):
    query, gallery, rng = planted(seed)
    k = 10
    scores = brute_scores(query, gallery)
    ann = ann_lists(scores, k, rng)
    # ground truth as big-ann-benchmarks holds it: ids by distance ascending, deeper than k (here: all of them)
    dist = 1.0 - scores.astype(np.float64)
    order = np.argsort(dist, axis=1, kind="stable")
    true_d = np.take_along_axis(dist, order, axis=1)
    # its 1e-6 tolerance and evalcore's exact ties agree when no distinct score lies within 1e-6 of the k-th
    near = np.abs(true_d - true_d[:, k - 1:k]) < 1e-6
    assert (near == (true_d == true_d[:, k - 1:k])).all()
    expected = big_ann_recall(order, true_d, np.where(ann < 0, -2, ann), k)
    by_embeddings = evalcore.ann_recall(ann, query=query, gallery=gallery, k=k)
    np.testing.assert_array_equal(by_embeddings.per_query, expected)
    # the precomputed path with big-ann-benchmarks' own tolerance, on a ground truth 3k deep
    given = evalcore.ann_recall(ann, exact_ids=order[:, :3 * k], exact_scores=true_d[:, :3 * k], k=k, tolerance=1e-6)
    np.testing.assert_array_equal(given.per_query, big_ann_recall(order[:, :3 * k], true_d[:, :3 * k],
                                                                    np.where(ann < 0, -2, ann), k))


def test_precomputed_from_evalcore_neighbors_equals_the_embedding_path():
    query, gallery, rng = planted(7)
    k = 5
    ann = ann_lists(brute_scores(query, gallery), k, rng)
    depth = 40
    table = evalcore.neighbors(query=query, gallery=gallery, k=depth)
    ids = table.column("item").to_numpy().reshape(-1, depth)
    sc = table.column("score").to_numpy().reshape(-1, depth)
    expected = evalcore.ann_recall(ann, query=query, gallery=gallery, k=k).per_query
    np.testing.assert_array_equal(evalcore.ann_recall(ann, exact_ids=ids, exact_scores=sc, k=k).per_query, expected)
    # the table itself
    np.testing.assert_array_equal(evalcore.ann_recall(ann, exact_ids=table, k=k).per_query, expected)
    with pytest.raises(evalcore.InputError, match="^exact_ids: the table's rows are not"):
        evalcore.ann_recall(ann, exact_ids=table.slice(1), k=k)
    with pytest.raises(evalcore.InputError, match="^exact_ids: the table lacks score"):
        evalcore.ann_recall(ann, exact_ids=table.drop_columns(["score"]), k=k)


def test_chunk_proof():
    query, gallery, rng = planted(11, q=60)
    k = 8
    ann = ann_lists(brute_scores(query, gallery), k, rng)
    base = evalcore.ann_recall(ann, query=query, gallery=gallery, k=k, threads=1).per_query
    for threads, chunks in ((4, 7), (2, 60), (3, 1)):
        got = evalcore.ann_recall(ann, query=da.from_array(query, chunks=(chunks, -1)),
                                  gallery=da.from_array(gallery, chunks=(13, -1)), k=k, threads=threads)
        np.testing.assert_array_equal(got.per_query, base)
    # the gallery in another order, the ANN ids renamed with it
    perm = np.random.default_rng(0).permutation(len(gallery))
    inverse = np.argsort(perm)
    renamed = np.where(ann >= 0, inverse[np.maximum(ann, 0)], -1)
    np.testing.assert_array_equal(evalcore.ann_recall(renamed, query=query, gallery=gallery[perm], k=k).per_query, base)


def test_dot_similarity():
    query, gallery, rng = planted(5)
    k = 5
    dot = (query.astype(np.float64) @ gallery.astype(np.float64).T).astype(np.float32)
    ann = ann_lists(dot, k, rng)
    got = evalcore.ann_recall(ann, query=query, gallery=gallery, k=k, similarity="dot")
    np.testing.assert_array_equal(got.per_query, brute_recall(ann, dot, k))


def test_huge_ids_in_a_given_list():
    # ids as large as int64 holds (hashed or external ids): keys per (row, id) must not wrap around
    top = np.iinfo(np.int64).max
    ids = np.array([[top, 10, 11], [1, 2, 3], [4, 5, 6]])
    ann = np.array([[top, 10], [1, 9], [top - 2, 4]])
    d = np.array([[0.1, 0.2, 0.3]] * 3)
    r = evalcore.ann_recall(ann, exact_ids=ids, exact_scores=d, k=2)
    assert r.per_query.tolist() == [1.0, 0.5, 0.5]


def test_ties_reaching_the_end_of_a_given_list_are_warned():
    ids = np.array([[0, 1, 2, 3]])
    d = np.array([[0.1, 0.2, 0.2, 0.2]])
    with pytest.warns(evalcore.EvalcoreWarning, match="^exact_ids: 1 queries' ties"):
        r = evalcore.ann_recall(np.array([[0, 3]]), exact_ids=ids, exact_scores=d, k=2)
    assert r.per_query.tolist() == [1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evalcore.ann_recall(np.array([[0, 3]]), exact_ids=ids[:, :3], exact_scores=np.array([[0.1, 0.2, 0.3]]), k=2)


@pytest.mark.parametrize("kwargs, starts", [
    ({"ann_ids": np.zeros((2, 3))}, "ann_ids: dtype float64"),
    ({"ann_ids": np.zeros(3, np.int64)}, "ann_ids: shape (3,)"),
    ({"ann_ids": np.full((2, 3), -2)}, "ann_ids: rows 0, 1 hold indices below -1"),
    ({"k": 4}, "k: 4 must be an integer from 1"),
    ({"k": 0}, "k: 0 must be an integer from 1"),
    ({"ann_ids": np.full((2, 3), 99)}, "ann_ids: indices beyond the gallery's 5 rows"),
    ({"ann_ids": np.zeros((3, 3), np.int64)}, "ann_ids: 3 rows but query has 2"),
    ({"gallery": None}, "gallery: missing"),
    ({"exact_ids": np.zeros((2, 3), np.int64)}, "exact_ids: give query and gallery embeddings or"),
    ({"query": np.zeros((2, 4), np.float32)}, "query: rows 0, 1 are all-zero"),
    ({"similarity": "l2"}, "similarity: 'l2' is not cosine, dot or euclidean"),
])
def test_bad_input_is_one_line_naming_the_parameter(kwargs, starts):
    rng = np.random.default_rng(0)
    args = {"ann_ids": np.zeros((2, 3), np.int64), "query": rng.standard_normal((2, 4)).astype(np.float32),
            "gallery": rng.standard_normal((5, 4)).astype(np.float32)} | kwargs
    with pytest.raises(evalcore.InputError) as caught:
        evalcore.ann_recall(args.pop("ann_ids"), **args)
    assert str(caught.value).startswith(starts) and "\n" not in str(caught.value)


@pytest.mark.parametrize("kwargs, starts", [
    ({"exact_scores": np.array([[0.1, np.nan, 0.3]])}, "exact_scores: must be finite"),
    ({"exact_scores": np.array([[0.1, 0.2]])}, "exact_scores: shape (1, 2)"),
    ({"exact_scores": None}, "exact_scores: missing"),
    ({"k": 3, "ann_ids": np.zeros((1, 3), np.int64), "exact_ids": np.zeros((1, 2), np.int64),
      "exact_scores": np.zeros((1, 2))}, "exact_ids: 2 columns, fewer than k=3"),
    ({"tolerance": -1.0}, "tolerance: -1.0 must be"),
    ({"ann_ids": np.zeros((2, 2), np.int64)}, "exact_ids: 1 rows but ann_ids has 2"),
])
def test_bad_precomputed_input(kwargs, starts):
    args = {"ann_ids": np.zeros((1, 2), np.int64), "exact_ids": np.array([[0, 1, 2]]),
            "exact_scores": np.array([[0.1, 0.2, 0.3]]), "k": 2} | kwargs
    with pytest.raises(evalcore.InputError) as caught:
        evalcore.ann_recall(args.pop("ann_ids"), **args)
    assert str(caught.value).startswith(starts) and "\n" not in str(caught.value)
