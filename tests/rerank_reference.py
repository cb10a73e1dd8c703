"""A dense float64 reference of k-reciprocal re-ranking (Zhong et al., CVPR 2017), for the tests and bench.

Written from the paper and the steps of the ``re_ranking(q_g_dist, q_q_dist,
g_g_dist, k1, k2, lambda_value)`` function that torchreid, fast-reid and
Person_reID_baseline_pytorch ship, in float64 throughout and on dense
(Q + G) x (Q + G) matrices, on purpose: it is the slow, obvious version the
sparse implementation in evalcore is compared against. Two deliberate
choices, both documented in the README: the arithmetic is float64 (the shipped
function rounds to float32), and ``initial_rank`` is a *stable* argsort, so
tied distances keep the lower index first (evalcore's tie rule, CONTRACT §4);
the shipped function's quicksort leaves the order of ties unspecified.
"""
from __future__ import annotations

import numpy as np


def re_ranking(q_g_dist: np.ndarray, q_q_dist: np.ndarray, g_g_dist: np.ndarray, k1: int = 20, k2: int = 6,
               lambda_value: float = 0.3, dtype=np.float64) -> np.ndarray:
    """Final (Q, G) distances: (1 - lambda) * Jaccard + lambda * original, from dense input distances.

    ``dtype=np.float32`` keeps the matrices in float32 as the shipped function does (the bench times it so at
    Market's shape, where float64 would not fit in memory); the tests use float64."""
    n_q = q_g_dist.shape[0]
    original = np.concatenate([np.concatenate([q_q_dist, q_g_dist], axis=1),
                               np.concatenate([q_g_dist.T, g_g_dist], axis=1)], axis=0).astype(dtype, copy=False)
    np.square(original, out=original)
    # each column over its maximum, then transposed: row i scaled by its own largest value
    original /= np.max(original, axis=0)
    original = np.transpose(original)
    n_all = original.shape[0]
    V = np.zeros_like(original)
    # row by row into int32 (the shipped function's type): the same order as one argsort, a quarter the memory
    initial_rank = np.empty(original.shape, dtype=np.int32)
    for a in range(0, n_all, 1024):
        initial_rank[a:a + 1024] = np.argsort(original[a:a + 1024], axis=1, kind="stable")
    half = int(np.around(k1 / 2.0))
    for i in range(n_all):
        forward = initial_rank[i, :k1 + 1]
        backward = initial_rank[forward, :k1 + 1]
        k_reciprocal = forward[np.where(backward == i)[0]]
        expansion = k_reciprocal
        for candidate in k_reciprocal:
            c_forward = initial_rank[candidate, :half + 1]
            c_backward = initial_rank[c_forward, :half + 1]
            c_reciprocal = c_forward[np.where(c_backward == candidate)[0]]
            if len(np.intersect1d(c_reciprocal, k_reciprocal)) > 2.0 / 3 * len(c_reciprocal):
                expansion = np.append(expansion, c_reciprocal)
        expansion = np.unique(expansion)
        weight = np.exp(-original[i, expansion])
        V[i, expansion] = weight / np.sum(weight)
    original = original[:n_q]
    if k2 != 1:
        V_qe = np.zeros_like(V)
        for i in range(n_all):
            V_qe[i, :] = np.mean(V[initial_rank[i, :k2], :], axis=0)
        V = V_qe
    inv_index = [np.where(V[:, j] != 0)[0] for j in range(n_all)]
    jaccard = np.zeros_like(original)
    for i in range(n_q):
        temp_min = np.zeros(n_all, dtype=dtype)
        for j in np.where(V[i, :] != 0)[0]:
            rows = inv_index[j]
            temp_min[rows] = temp_min[rows] + np.minimum(V[i, j], V[rows, j])
        jaccard[i] = 1 - temp_min / (2.0 - temp_min)
    final = jaccard * (1 - lambda_value) + original * lambda_value
    return final[:, n_q:]


def distances_from_cosine(cos: np.ndarray) -> np.ndarray:
    """d = 2 - 2 cos (the squared Euclidean distance of unit vectors), in float64, as the reference takes it."""
    return 2.0 - 2.0 * np.asarray(cos, dtype=np.float64)
