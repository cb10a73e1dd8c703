"""k-reciprocal re-ranking (Zhong et al., CVPR 2017) on sparse neighbour lists (README, Re-ranking).

The reference function works on the dense (Q + G) x (Q + G) matrix of

    original(i, j) = d(i, j)^2 / M_i,   d = 2 - 2 cos,   M_i = max_j d(i, j)^2

(each row scaled by its own largest squared distance). Everything it does
after that only looks at each row's first k1 + 1 (or k2) columns in
``initial_rank`` and at the weights V of k-reciprocal sets, so it is computed
here from the exact top-k lists (``core.scan.neighbors``):

- ``k_reciprocal_sets``: R(i) = {j in top(i, k1+1) : i in top(j, k1+1)},
  expanded by R*(c) (top round(k1/2)+1) of each c in R(i) sharing more than
  2/3 of its members with R(i);
- V(i, j) = exp(-original(i, j)) / sum over the set, for j in the set;
- local query expansion: V_qe(i) = mean of V over top(i, k2);
- Jaccard: t(q, g) = sum_j min(V_qe(q, j), V_qe(g, j)), jaccard = 1 - t / (2 - t);
- final(q, g) = (1 - lambda) * jaccard + lambda * original(q, g).

A pair with no shared j has t = 0 and final = (1 - lambda) + lambda *
original(q, g): one increasing map of d per query, so only the pairs with
t > 0 (``shared_terms``) need storing. Sums run in the reference's order
(sets ascending, rows of top(i, k2) in rank order) and in float64, so the
numbers equal a dense float64 transcription of the reference bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from evalcore.core.canonical import canonical_pairs

if TYPE_CHECKING:  # core.scan imports this module's backend, which imports the records here
    from evalcore.core.scan.neighbors import Neighbors


@dataclass(frozen=True)
class RerankParams:
    """``--rerank k1,k2,lambda``."""

    k1: int = 20
    k2: int = 6
    lambda_value: float = 0.3

    @property
    def list_length(self) -> int:
        """How many nearest rows each row's list needs: k1 + 1 for the k-reciprocal sets, k2 for expansion."""
        return max(self.k1 + 1, self.k2)


@dataclass(frozen=True)
class SparseRows:
    """A sparse (n, n_cols) matrix by rows: row i's columns ``cols[indptr[i]:indptr[i+1]]`` (ascending), values."""

    indptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.cols.nbytes + self.vals.nbytes)


def squared_distance(scores: np.ndarray) -> np.ndarray:
    """d^2 with d = 2 - 2 cos, in float64, from canonical cosine scores."""
    d = 2.0 - 2.0 * np.asarray(scores, dtype=np.float64)
    return np.power(d, 2)


def row_scale(far_scores: np.ndarray) -> np.ndarray:
    """M_i = max_j d(i, j)^2 = d^2 at the row's lowest cosine (its farthest item)."""
    return squared_distance(far_scores)


def original_distance(scores: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """original(i, j) = d(i, j)^2 / M_i (``scale`` broadcast along the rows of ``scores``)."""
    return squared_distance(scores) / scale


@njit(cache=True, nogil=True)
def _is_in(ids, row, k, item):  # pragma: no cover - compiled
    for t in range(k):
        if ids[row, t] == item:
            return True
    return False


@njit(cache=True, nogil=True)
def _reciprocal_into(ids, i, k, out):  # pragma: no cover - compiled
    """{j in top(i, k) : i in top(j, k)} into ``out``, in i's rank order; returns how many."""
    n = 0
    for t in range(k):
        j = ids[i, t]
        if _is_in(ids, j, k, i):
            out[n] = j
            n += 1
    return n


@njit(cache=True, nogil=True)
def _sets(ids, k1, half, indptr, cols):  # pragma: no cover - compiled
    n_rows = ids.shape[0]
    in_set = np.full(n_rows, -1, dtype=np.int64)  # in_set[j] == i: j is in R(i)
    chosen = np.full(n_rows, -1, dtype=np.int64)  # chosen[j] == i: j is in the expanded set of i
    k_rec = np.empty(k1 + 1, dtype=np.int64)
    c_rec = np.empty(half + 1, dtype=np.int64)
    members = np.empty(n_rows, dtype=np.int64)
    pos = 0
    for i in range(n_rows):
        n_k = _reciprocal_into(ids, i, k1 + 1, k_rec)
        n_m = 0
        for x in range(n_k):
            in_set[k_rec[x]] = i
            if chosen[k_rec[x]] != i:
                chosen[k_rec[x]] = i
                members[n_m] = k_rec[x]
                n_m += 1
        for x in range(n_k):
            n_c = _reciprocal_into(ids, k_rec[x], half + 1, c_rec)
            common = 0
            for y in range(n_c):
                if in_set[c_rec[y]] == i:
                    common += 1
            if common > 2.0 / 3 * n_c:
                for y in range(n_c):
                    if chosen[c_rec[y]] != i:
                        chosen[c_rec[y]] = i
                        members[n_m] = c_rec[y]
                        n_m += 1
        if pos + n_m > cols.shape[0]:
            return -1
        cols[pos:pos + n_m] = np.sort(members[:n_m])
        pos += n_m
        indptr[i + 1] = pos
    return pos


def k_reciprocal_csr(ids: np.ndarray, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's expanded k-reciprocal set (ascending) as (indptr, members), from the rows' nearest lists
    ``ids`` (n, >= k1+1): R(i) = {j in top(i, k1+1) : i in top(j, k1+1)}, joined by R*(c) (top
    round(k1/2)+1) of each c in R(i) with more than 2/3 of R*(c) in R(i)."""
    half = int(np.around(k1 / 2.0))
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    size = max(1024, 4 * (k1 + 1) * len(ids))
    while True:
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        cols = np.empty(size, dtype=np.int64)
        used = _sets(ids, k1, half, indptr, cols)
        if used >= 0:
            return indptr, cols[:used].copy()
        size *= 2


def k_reciprocal_sets(ids: np.ndarray, k1: int) -> list[np.ndarray]:
    """Each row's expanded k-reciprocal set (ascending), as one array per row (``k_reciprocal_csr``)."""
    indptr, cols = k_reciprocal_csr(ids, k1)
    return np.split(cols, indptr[1:-1])


def reciprocal_weights(sets: list[np.ndarray], original: list[np.ndarray]) -> SparseRows:
    """V(i, j) = exp(-original(i, j)) / sum_{j' in set(i)} exp(-original(i, j')) for j in set(i)."""
    vals = []
    for dist in original:
        weight = np.exp(-dist)
        vals.append(weight / np.sum(weight))
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(s) for s in sets])
    return SparseRows(indptr, np.concatenate(sets).astype(np.int64), np.concatenate(vals).astype(np.float64))


@njit(cache=True, nogil=True)
def _expand(indptr, cols, vals, top, n_cols, out_cols, out_vals, out_indptr):  # pragma: no cover - compiled
    acc = np.zeros(n_cols)
    mark = np.full(n_cols, -1, dtype=np.int64)
    touched = np.empty(n_cols, dtype=np.int64)
    pos = 0
    for i in range(top.shape[0]):
        n_t = 0
        for t in range(top.shape[1]):
            r = top[i, t]
            for p in range(indptr[r], indptr[r + 1]):
                c = cols[p]
                if mark[c] != i:
                    mark[c] = i
                    acc[c] = vals[p]
                    touched[n_t] = c
                    n_t += 1
                else:
                    acc[c] += vals[p]
        chosen = np.sort(touched[:n_t])
        for x in range(n_t):
            out_cols[pos + x] = chosen[x]
            out_vals[pos + x] = acc[chosen[x]] / top.shape[1]
        pos += n_t
        out_indptr[i + 1] = pos
    return pos


def local_expansion(v: SparseRows, ids: np.ndarray, k2: int) -> SparseRows:
    """V_qe(i) = mean of V over the rows top(i, k2), summed in rank order (k2 = 1: V itself)."""
    if k2 == 1:
        return v
    top = np.ascontiguousarray(ids[:, :k2], dtype=np.int64)
    n = len(top)
    size = int(np.diff(v.indptr)[top].sum())  # at most every entry of the k2 rows, for every row
    out_cols = np.empty(size, dtype=np.int64)
    out_vals = np.empty(size, dtype=np.float64)
    out_indptr = np.zeros(n + 1, dtype=np.int64)
    used = _expand(v.indptr, v.cols, v.vals, top, n, out_cols, out_vals, out_indptr)
    return SparseRows(out_indptr, out_cols[:used].copy(), out_vals[:used].copy())


def by_columns(v: SparseRows, n_cols: int) -> SparseRows:
    """The same matrix by columns: column j's rows ascending (``cols`` then holds row indices)."""
    rows = np.repeat(np.arange(len(v.indptr) - 1, dtype=np.int64), np.diff(v.indptr))
    order = np.argsort(v.cols, kind="stable")
    indptr = np.zeros(n_cols + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(v.cols, minlength=n_cols))
    return SparseRows(indptr, rows[order], v.vals[order])


@njit(cache=True, nogil=True)
def _shared(indptr, cols, vals, c_indptr, c_rows, c_vals, r0, r1, first_item, n_all,
            out_indptr, out_items, out_t, pos, temp, mark, touched):  # pragma: no cover - compiled
    """Rows r0 .. r1 into ``out_*`` from position ``pos``; returns (position, next row): it stops before a row
    that does not fit, for the caller to grow the arrays and go on."""
    for i in range(r0, r1):
        n_t = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = cols[p]
            vij = vals[p]
            for q in range(c_indptr[j], c_indptr[j + 1]):
                r = c_rows[q]
                if r < first_item:
                    continue
                if mark[r] != i:
                    mark[r] = i
                    temp[r] = 0.0
                    touched[n_t] = r
                    n_t += 1
                temp[r] = temp[r] + min(vij, c_vals[q])
        if pos + n_t > out_items.shape[0]:
            for x in range(n_t):
                mark[touched[x]] = -1
            return pos, i
        chosen = np.sort(touched[:n_t])
        for x in range(n_t):
            out_items[pos + x] = chosen[x] - first_item
            out_t[pos + x] = temp[chosen[x]]
        pos += n_t
        out_indptr[i + 1] = pos
    return pos, r1


def shared_terms(v_qe: SparseRows, by_col: SparseRows, r0: int, r1: int, first_item: int) -> SparseRows:
    """t(q, g) = sum_j min(V_qe(q, j), V_qe(g, j)) over the j the two rows share, for rows q = r0 .. r1 and
    items g >= ``first_item`` (stored as g - first_item): only the pairs with t > 0, items ascending."""
    n_all = len(by_col.indptr) - 1
    # at most one entry per (j, row of column j) met: room for that, up to 2^25 entries (then it grows)
    met = int(np.diff(by_col.indptr)[v_qe.cols[v_qe.indptr[r0]:v_qe.indptr[r1]]].sum())
    size = max(1024, min(met, 2 ** 25))
    indptr = np.zeros(r1 + 1, dtype=np.int64)  # rows before r0 stay 0: sliced off below
    items = np.empty(size, dtype=np.int64)
    t = np.empty(size, dtype=np.float64)
    temp = np.zeros(n_all)
    mark = np.full(n_all, -1, dtype=np.int64)
    touched = np.empty(n_all, dtype=np.int64)
    pos, row = 0, r0
    while True:
        pos, row = _shared(v_qe.indptr, v_qe.cols, v_qe.vals, by_col.indptr, by_col.cols, by_col.vals, row, r1,
                           first_item, n_all, indptr, items, t, pos, temp, mark, touched)
        if row >= r1:
            return SparseRows(indptr[r0:] - indptr[r0], items[:pos].copy(), t[:pos].copy())
        items = np.concatenate([items, np.empty(max(len(items), n_all), np.int64)])
        t = np.concatenate([t, np.empty(max(len(t), n_all))])


def jaccard(t: np.ndarray) -> np.ndarray:
    """1 - t / (2 - t) (t = 0: exactly 1)."""
    return 1 - t / (2.0 - t)


def final_distance(jac: np.ndarray, original: np.ndarray, lambda_value: float) -> np.ndarray:
    """(1 - lambda) * jaccard + lambda * original, in the reference's order of operations."""
    return jac * (1 - lambda_value) + original * lambda_value


@dataclass(frozen=True)
class RerankModel:
    """What every query chunk needs: V_qe by rows and by columns, each row's M, the parameters, and the
    number of queries (rows 0 .. n_query of the union are queries, the rest gallery items in order)."""

    params: RerankParams
    n_query: int
    scale: np.ndarray
    v_qe: SparseRows
    by_col: SparseRows

    @property
    def nbytes(self) -> int:
        return self.scale.nbytes + self.v_qe.nbytes + self.by_col.nbytes

    def shared(self, q0: int, q1: int) -> SparseRows:
        """``shared_terms`` of queries q0 .. q1 against the gallery (items as gallery indices)."""
        return shared_terms(self.v_qe, self.by_col, q0, q1, self.n_query)


@njit(cache=True, nogil=True)
def _listed(ids, scores, ia, ib, out, found):  # pragma: no cover - compiled
    k = ids.shape[1]
    for p in range(ia.shape[0]):
        i = ia[p]
        for t in range(k):
            if ids[i, t] == ib[p]:
                out[p] = scores[i, t]
                found[p] = True
                break


def set_scores(rows: np.ndarray, nearest: Neighbors, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """canonical(rows[ia[p]], rows[ib[p]]) for every pair of a row and a member of its set: from the row's
    nearest list where the member is on it (the search scored it so), else computed (the sets reach beyond
    a row's own list: members of a neighbour's set)."""
    out = np.empty(len(ia), dtype=np.float32)
    found = np.zeros(len(ia), dtype=np.bool_)
    _listed(np.ascontiguousarray(nearest.ids), np.ascontiguousarray(nearest.scores), ia, ib, out, found)
    rest = np.flatnonzero(~found)
    out[rest] = canonical_pairs(rows, rows, ia[rest], ib[rest])
    return out


def build_model(rows: np.ndarray, n_query: int, nearest: Neighbors, params: RerankParams) -> RerankModel:
    """The re-ranking model of the union ``rows`` (normalised; queries first), from its exact neighbour lists
    (``nearest``: the ``params.list_length`` nearest rows of every row, and its farthest)."""
    ids = nearest.ids
    scale = row_scale(nearest.far_scores)
    sets = k_reciprocal_sets(ids, params.k1)
    ia = np.repeat(np.arange(len(sets), dtype=np.int64), [len(s) for s in sets])
    ib = np.concatenate(sets).astype(np.int64)
    original = original_distance(set_scores(rows, nearest, ia, ib), scale[ia])
    bounds = np.cumsum([0] + [len(s) for s in sets])
    v = reciprocal_weights(sets, [original[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
    v_qe = local_expansion(v, ids, params.k2)
    return RerankModel(params, n_query, scale, v_qe, by_columns(v_qe, len(rows)))
