"""The one compiled loop: fold a tile of scores into the per-query counts.

numpy needs four passes over a tile for this (arg-max, compare, nonzero,
gather) plus a binary search per candidate; at D = 128 that cost as much as
the matrix product itself. One compiled pass does all of it for about a
third of the product's time (numba, JIT-compiled once and cached on disk).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, boundscheck=False)
def fold_tile(scores, col0, junk, best, best_idx, lo_min, row_start, lo_vals, hi_vals, hist, near_row, near_val):
    """One pass over ``scores`` (queries x tile columns; relevant and per-query junk already -inf).

    For every query row i and column j not in ``junk``:
      * running arg-max: s > best[i] replaces (so the lowest index wins ties);
      * if s >= lo_min[i]: n_lo = #{lo <= s}, n_hi = #{hi < s} over the row's
        sorted bands; n_lo > n_hi means s is inside a band (kept in
        near_row/near_val for the exact pass), else s surely beats the n_hi
        lowest thresholds (hist[row_start[i] + n_hi - 1] += 1).
    Returns how many near entries were written.
    """
    n, width = scores.shape
    has_junk = junk.shape[0] > 0
    k = 0
    for i in range(n):
        b = best[i]
        bi = best_idx[i]
        lm = lo_min[i]
        s0 = row_start[i]
        s1 = row_start[i + 1]
        row = scores[i]
        gate = min(b, lm)  # one comparison per score: nothing below both the best and the lowest band matters
        for j in range(width):
            v = row[j]
            if v >= gate:
                if has_junk and junk[j]:
                    continue
                if v > b:
                    b = v
                    bi = col0 + j
                    gate = min(b, lm)
                if v >= lm:
                    # n_lo: first index in lo_vals[s0:s1] with lo > v
                    a, z = s0, s1
                    while a < z:
                        mid = (a + z) >> 1
                        if lo_vals[mid] <= v:
                            a = mid + 1
                        else:
                            z = mid
                    n_lo = a - s0
                    # n_hi: first index in hi_vals[s0:s1] with hi >= v
                    a, z = s0, s1
                    while a < z:
                        mid = (a + z) >> 1
                        if hi_vals[mid] < v:
                            a = mid + 1
                        else:
                            z = mid
                    n_hi = a - s0
                    if n_lo > n_hi:
                        near_row[k] = i
                        near_val[k] = v
                        k += 1
                    elif n_hi > 0:
                        hist[s0 + n_hi - 1] += 1
        best[i] = b
        best_idx[i] = bi
    return k


@njit(cache=True, nogil=True, boundscheck=False, fastmath=True)
def pair_dots(q, g, pair_q, pair_g, out, g_norm):
    """out[i] = sum_k q[pair_q[i], k] * g[pair_g[i], k] in float32; g_norm[i] = ||g[pair_g[i]]||.

    The band estimate of a relevant pair's score: any float32 summation order
    is within the band's bound (so ``fastmath`` may vectorise it), and indexing
    the rows here saves gathering (pairs x D) copies first, which at D = 2048
    costs more than the sums.
    """
    dims = q.shape[1]
    for i in range(pair_q.shape[0]):
        a = pair_q[i]
        b = pair_g[i]
        s = np.float32(0.0)
        n = 0.0
        for k in range(dims):
            x = g[b, k]
            s += q[a, k] * x
            n += np.float64(x) * np.float64(x)
        out[i] = s
        g_norm[i] = np.sqrt(n)


def warm_up() -> None:
    """Compile (or load from the on-disk cache) before timing-sensitive work."""
    s = np.zeros((1, 1), np.float32)
    fold_tile(s, 0, np.zeros(0, np.bool_), np.full(1, -np.inf, np.float32), np.full(1, -1, np.int64),
              np.full(1, np.inf, np.float32), np.zeros(2, np.int64), np.zeros(0, np.float32),
              np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(1, np.float32))
    pair_dots(np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32), np.zeros(1, np.int64),
              np.zeros(1, np.int64), np.zeros(1, np.float32), np.zeros(1, np.float64))


def dask_setup(worker) -> None:  # noqa: ARG001 - distributed's preload hook
    """Workers started with ``--preload evalcore.core.kernels`` compile the kernel before their first task."""
    warm_up()
