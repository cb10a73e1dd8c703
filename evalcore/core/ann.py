"""Recall@k of an approximate nearest-neighbour result against the exact neighbours, ties counted.

For a query with exact neighbours ranked best first and s_k the score of the
k-th one, an id of the approximate list is a hit when it is a gallery item
whose score ties or beats s_k (so every item tied with the k-th one counts,
whichever of them the exact search happened to list):

    recall@k = #{distinct ids j among the first k of the ANN list : score(j) >= s_k} / k

big-ann-benchmarks' ``knn`` recall with distance ties. With canonical scores
identical rows tie exactly, so the comparison is exact. Given a ground-truth
list deeper than k instead of the scores of the ANN ids, the tie set is the
list cut where the scores stop equalling s_k (within ``tolerance``; 0 is
exact equality, big-ann-benchmarks uses 1e-6 on its distances).
"""
from __future__ import annotations

import numpy as np


def distinct_ids(ids: np.ndarray) -> np.ndarray:
    """Mask of the entries that count: not -1 (a padded slot) and the first occurrence of their id in the row."""
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, axis=1, kind="stable")
    sorted_ids = np.take_along_axis(ids, order, axis=1)
    first = np.ones(ids.shape, dtype=bool)
    first[:, 1:] = sorted_ids[:, 1:] != sorted_ids[:, :-1]
    keep = np.empty(ids.shape, dtype=bool)
    np.put_along_axis(keep, order, first, axis=1)
    return keep & (ids >= 0)


def hits_by_score(ann_ids: np.ndarray, ann_scores: np.ndarray, kth_score: np.ndarray) -> np.ndarray:
    """Per query: distinct ANN ids whose score >= the exact k-th score (higher scores better)."""
    hit = distinct_ids(ann_ids) & (np.asarray(ann_scores) >= np.asarray(kth_score)[:, None])
    return np.count_nonzero(hit, axis=1)


def tie_end(true_scores: np.ndarray, k: int, tolerance: float = 0.0) -> np.ndarray:
    """Per query, how many leading ground-truth entries count: k, then every following one whose score is
    within ``tolerance`` of the k-th, up to the first that is not (big-ann-benchmarks' ``set_end``)."""
    scores = np.asarray(true_scores, dtype=np.float64)
    tail = np.abs(scores[:, k:] - scores[:, k - 1:k]) <= tolerance
    # the run of tied entries right after the k-th: count leading Trues
    return k + np.cumprod(tail, axis=1).sum(axis=1).astype(np.int64)


def hits_in_ground_truth(ann_ids: np.ndarray, true_ids: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per query: distinct ANN ids found among the first ``end[q]`` ground-truth ids of its row."""
    ann_ids = np.asarray(ann_ids, dtype=np.int64)
    true_ids = np.asarray(true_ids, dtype=np.int64)
    n = len(ann_ids)
    if not n:
        return np.zeros(0, dtype=np.int64)
    # one key per (row, id) so one membership test serves every row; ids renumbered densely first, so
    # the keys cannot overflow whatever the ids' size
    _, dense = np.unique(np.concatenate([ann_ids.ravel(), true_ids.ravel()]), return_inverse=True)
    span = int(dense.max(initial=0)) + 1
    rows = np.arange(n, dtype=np.int64)[:, None]
    ann_keys = rows * span + dense[:ann_ids.size].reshape(ann_ids.shape)
    true_keys = rows * span + dense[ann_ids.size:].reshape(true_ids.shape)
    counted = np.arange(true_ids.shape[1])[None, :] < np.asarray(end)[:, None]
    hit = distinct_ids(ann_ids) & np.isin(ann_keys, true_keys[counted & (true_ids >= 0)])
    return np.count_nonzero(hit, axis=1)


def recall_at_k(hits: np.ndarray, k: int) -> np.ndarray:
    """recall@k per query = hits / k."""
    return np.asarray(hits, dtype=np.float64) / k
