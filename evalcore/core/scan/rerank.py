"""The re-ranked scan: a chunk of queries ranked by k-reciprocal re-ranking's final distance (README, Re-ranking).

A pair's final distance is J * (1 - lambda) + lambda * d^2 / M_q with
d = 2 - 2c: J = 1 unless the pair shares a Jaccard term (the chunk's
``core.rerank.shared_terms``, only the pairs with one). For a fixed J it only
falls as the cosine c rises (for c <= 1), so, per score tile, float32 products
give estimates v of the cosines, each within the error bound e of the
canonical score (``embeddings.score_error``), and the negated final distance
lies between its values at v - e and v + e. A pair both values place between
the same two relevant thresholds is counted at once (``fold_shared_estimates``
for the shared pairs, each with its own J; ``fold_estimates`` for the rest of
the tile); only the pairs the bounds leave undecided, the rank-1 candidates
and intervals that reach c = 1 (where d^2 turns) get canonical cosines and
exact final distances, folded by ``kernels.fold_settled``. So every
comparison is made as on exact final distances: ranks are counts, ties follow
the policy, rank 1 is the lowest index among the smallest distances. Memory:
the chunk's shared terms and one tile; no query x gallery matrix.

``finish`` reports distances; ``with_cosines`` then puts the cosine score
back into ``top1_score`` and ``relevant_score`` (CONTRACT §15) and keeps the
re-ranked distance of rank 1 as ``rerank_distance``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

from evalcore.core.canonical import canonical_pairs
from evalcore.core.kernels import NEAR, TOP, beaten_end, fold_settled
from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.rerank import RerankParams, SparseRows, final_distance, jaccard, original_distance
from evalcore.core.scan.base import TILE_COLS, Gallery, Ranked, Span, whole_rows
from evalcore.core.scan.counts import finish_states, merge_states, tile_mask
from evalcore.core.scan.embeddings import error_floor, row_norms, score_error, threshold_scores
from evalcore.core.scan.scores import ScoreState

_NO_JUNK = np.zeros(0, dtype=bool)


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _negated(c, jac, scale, lam):  # pragma: no cover - compiled
    """-final at cosine c for a pair of Jaccard distance ``jac``, the operations in ``final_distance``'s
    order; increasing in c for c <= 1 (d = 2 - 2c >= 0)."""
    d = 2.0 - 2.0 * c
    return -(jac * (1.0 - lam) + (d * d) / scale * lam)


@njit(cache=True, nogil=True, boundscheck=False)
def _plain_gate(bar, e, m, lam):  # pragma: no cover - compiled
    """A float32 g such that every estimate v < g of a pair without a shared term (jaccard 1) has
    v + e < 1 and -final(v + e) < ``bar``: ``_bounded_flags`` would neither count nor flag it. Solved from
    -((1 - lam) + lam (2 - 2c)^2 / m) = bar, then checked with ``_negated`` itself (which rises with c, each
    rounding being monotone) and lowered until the check holds; -inf when none is found."""
    if not bar > -np.inf:
        return np.float32(-np.inf)
    s = -bar - (1.0 - lam)
    c = 1.0
    if lam > 0.0 and s > 0.0:
        c = 1.0 - np.sqrt(s * m / lam) / 2.0
    g = np.float32(c - e)
    step = abs(np.float64(g)) * 2.0 ** -20 + 1e-30
    for _ in range(8):
        x = np.float64(g) + e
        if x < 1.0 and _negated(x, 1.0, m, lam) < bar:
            return g
        g = np.float32(np.float64(g) - step)
        step *= 16.0
    return np.float32(-np.inf)


@njit(cache=True, nogil=True, inline="always")
def _bounded_flags(v, e, jac, m, lam, bar, b, bi, col, lowest, thresholds, s0, s1, pessimistic, hist):
    """One pair whose cosine lies in [v - e, v + e] (v + e < 1, so -final is increasing in it): counted in
    ``hist`` when both bounds fall between the same thresholds (flags 0), else NEAR; TOP when it may be rank 1
    (its upper bound reaches the bar and beats the row's best so far, lower column first on a tie)."""
    flags = 0
    g_hi = _negated(v + e, jac, m, lam)
    if g_hi >= bar and (g_hi > b or (g_hi == b and (bi < 0 or col < bi))):
        flags |= TOP
    if g_hi > lowest or (pessimistic and g_hi == lowest):
        end_lo = beaten_end(thresholds, s0, s1, _negated(v - e, jac, m, lam), pessimistic)
        if end_lo == beaten_end(thresholds, s0, s1, g_hi, pessimistic):
            if end_lo > s0:
                hist[end_lo - 1] += 1
        else:
            flags |= NEAR
    return flags


@njit(cache=True, nogil=True, boundscheck=False)
def fold_shared_estimates(indptr, items, t, l0, est, err, junk, col0, pessimistic, thr_start, thresholds, hist,
                          best, best_idx, scale, lam, out_p, out_f):  # pragma: no cover - compiled
    """``fold_estimates`` for the pairs that share a term (rows ``l0 ..`` of the chunk's CSR lists ``indptr``,
    ``items``, ``t``; each pair with its own Jaccard distance 1 - t / (2 - t)) that fall in this tile: counts
    what the bounds decide, writes the others' positions in the lists and flags (NEAR, TOP) to ``out_*``, and
    sets every such pair to -inf in ``est`` for ``fold_estimates``. Relevant and junk pairs (-inf) stay out."""
    n, width = est.shape
    has_junk = junk.shape[0] > 0
    pos = 0
    for i in range(n):
        a = np.searchsorted(items[indptr[l0 + i]:indptr[l0 + i + 1]], col0) + indptr[l0 + i]
        z = np.searchsorted(items[indptr[l0 + i]:indptr[l0 + i + 1]], col0 + width) + indptr[l0 + i]
        e = err[i]
        m = scale[i]
        b = best[i]
        bi = best_idx[i]
        s0 = thr_start[i]
        s1 = thr_start[i + 1]
        lowest = thresholds[s0] if s1 > s0 else np.inf
        bar = b
        for p in range(a, z):
            j = items[p] - col0
            v = np.float64(est[i, j])
            if v != -np.inf and not (has_junk and junk[j]) and v - e < 1.0 and m > 0:
                g = _negated(v - e, 1 - t[p] / (2.0 - t[p]), m, lam)
                if g > bar:
                    bar = g
        for p in range(a, z):
            j = items[p] - col0
            v = np.float64(est[i, j])
            if v == -np.inf or (has_junk and junk[j]):
                continue
            est[i, j] = -np.inf
            hi = v + e
            flags = 0
            if not (m > 0) or hi >= 1.0:
                flags = NEAR | TOP
            else:
                flags = _bounded_flags(v, e, 1 - t[p] / (2.0 - t[p]), m, lam, bar, b, bi, col0 + j, lowest,
                                       thresholds, s0, s1, pessimistic, hist)
            if flags:
                out_p[pos] = p
                out_f[pos] = flags
                pos += 1
    return pos


@njit(cache=True, nogil=True, boundscheck=False)
def fold_estimates(est, err, junk, col0, pessimistic, thr_start, thresholds, hist, best, best_idx, scale, lam,
                   row0, out_r, out_c, out_f):  # pragma: no cover - compiled
    """Count a tile of pairs without a shared term from float32 estimates of their cosines, from row ``row0``.

    For such a pair -final = G(c), G increasing in c for c <= 1 (``_negated``, jaccard = 1); the canonical c lies in
    [v - e, v + e], so G(v - e) <= -final <= G(v + e). A pair both bounds place between the same thresholds
    is counted here; the rest (``NEAR``), those that may be rank 1 (``TOP``: G(v + e) at least the row's best
    so far and the tile's highest G(v - e)) and any whose interval reaches c = 1 (where G turns) are written
    to ``out_*`` for exact values. A row's estimates below its ``_plain_gate`` (most of them) take one
    comparison. Returns (pairs written, next row): rows are taken whole, and the call stops early when the
    next row might not fit.
    """
    n, width = est.shape
    has_junk = junk.shape[0] > 0
    pos = 0
    for i in range(row0, n):
        if pos + width > out_r.shape[0]:
            return pos, i
        s0 = thr_start[i]
        s1 = thr_start[i + 1]
        lowest = thresholds[s0] if s1 > s0 else np.inf
        e = err[i]
        m = scale[i]
        b = best[i]
        bi = best_idx[i]
        row = est[i]
        exact_all = not (m > 0)
        vmax = -np.inf
        for j in range(width):
            v = row[j]
            if v != -np.inf and not (has_junk and junk[j]) and v > vmax:
                vmax = v
        bar = b
        if vmax > -np.inf and vmax - e < 1.0 and not exact_all:
            bar = max(b, _negated(np.float64(vmax) - e, 1.0, m, lam))
        gate = np.float32(-np.inf) if exact_all else _plain_gate(min(lowest, bar), e, m, lam)
        for j in range(width):
            if row[j] < gate:  # most pairs: neither counted, near a threshold nor a rank-1 candidate
                continue
            v = np.float64(row[j])
            if v == -np.inf or (has_junk and junk[j]):
                continue
            hi = v + e
            flags = 0
            if exact_all or hi >= 1.0:
                flags = NEAR | TOP
            else:
                flags = _bounded_flags(v, e, 1.0, m, lam, bar, b, bi, col0 + j, lowest, thresholds, s0, s1,
                                       pessimistic, hist)
            if flags:
                out_r[pos] = i
                out_c[pos] = j
                out_f[pos] = flags
                pos += 1
    return pos, n


@dataclass
class RerankQueries:
    """One chunk of queries: normalised rows ``q0 ..``, their M (``scale``), their shared Jaccard terms
    (rows of the chunk, gallery items), the parameters; ``estimates``, when given, float32 estimates of their
    cosines with every gallery item (from the neighbour search, which multiplied these rows already), taken
    instead of the tiles' products; ``cosines`` of the relevant pairs once known."""

    normalized: np.ndarray
    q0: int
    scale: np.ndarray
    shared: SparseRows
    params: RerankParams
    estimates: np.ndarray | None = field(default=None, repr=False)
    cosines: np.ndarray | None = field(default=None, repr=False)

    def jaccard_pairs(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Jaccard distances at (chunk row, gallery item) pairs (1 where nothing is shared)."""
        out = np.ones(len(rows))
        if not len(rows) or not len(self.shared.cols):
            return out
        # items ascend within each row, so (row, item) keys ascend over the whole list
        width = int(max(self.shared.cols.max(), np.max(items))) + 1
        keys = segment_ids(self.shared.indptr) * width + self.shared.cols
        want = np.asarray(rows, dtype=np.int64) * width + items
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        found = keys[at] == want
        out[found] = jaccard(self.shared.vals[at[found]])
        return out

    def final(self, cos: np.ndarray, rows: np.ndarray | None, jac: np.ndarray) -> np.ndarray:
        """Final distances from cosine scores (a tile, or pairs at chunk ``rows``) and Jaccard distances."""
        scale = self.scale[:, None] if rows is None else self.scale[rows]
        return final_distance(jac, original_distance(cos, scale), self.params.lambda_value)


class RerankScan:
    """The scan backend of re-ranked evaluation; its source is a ``Gallery`` of normalised rows."""

    name = "rerank"
    splits_pairs = False  # thresholds() keeps the chunk's cosines when it scores all of its pairs

    def thresholds(self, queries: RerankQueries, truth: Truth, source: Gallery,
                   pairs: np.ndarray | None = None) -> np.ndarray:
        cos = threshold_scores(queries.normalized, truth, source, pairs)
        rows = segment_ids(truth.rel_indptr)
        items = truth.rel_items
        if pairs is not None:
            rows, items = rows[pairs], items[pairs]
        else:
            queries.cosines = cos
        # compared as negated distances: higher is better, exactly
        return -queries.final(cos, rows, queries.jaccard_pairs(rows, items))

    def new_states(self, queries: RerankQueries, truth: Truth, thresholds: np.ndarray,
                   ties: str) -> list[ScoreState]:
        return [ScoreState(truth, len(queries.normalized), thresholds, ties, higher_is_better=False)]

    def scan(self, queries: RerankQueries, states: list[ScoreState], source: Gallery, span: Span | None,
             gallery_junk: np.ndarray | None) -> None:
        blocks = source.blocks() if span is None else source.blocks(*span)
        q = queries.normalized
        dims = q.shape[1]
        q_norms = row_norms(q)
        with threadpool_limits(limits=1, user_api="blas"):
            for g0, block in blocks:
                for c0 in range(0, len(block), TILE_COLS):
                    rows = block[c0:c0 + TILE_COLS]
                    col0 = g0 + c0
                    err = score_error(dims) * q_norms * float(row_norms(rows).max()) + error_floor(dims)
                    colmask = tile_mask(col0, len(rows), gallery_junk)
                    for state in states:
                        if queries.estimates is None:
                            est = np.matmul(q[state.l0:state.l1], rows.T)
                        else:  # any float32 product is within err of the canonical score, whatever its order
                            est = np.array(queries.estimates[state.l0:state.l1, col0:col0 + len(rows)])
                        state.mask(est, col0)
                        fold_shared(queries, state, est, rows, col0, colmask, err[state.l0:state.l1])
                        fold_plain(queries, state, est, rows, col0, colmask, err[state.l0:state.l1])

    def merge(self, parts: list[list[ScoreState]]) -> list[ScoreState]:
        return merge_states(parts)

    def finish(self, states: list[ScoreState], truth: Truth, ties: str) -> Ranked:
        ranked = finish_states(states, truth, ties)
        ranked.top1_score = -ranked.top1_score
        ranked.relevant_score = -ranked.relevant_score
        return ranked


def fold_shared(queries: RerankQueries, state: ScoreState, est: np.ndarray, tile: np.ndarray, col0: int,
                colmask: np.ndarray | None, err: np.ndarray) -> None:
    """Fold the tile's pairs that share a Jaccard term (``fold_shared_estimates``, then exact final distances
    from canonical cosines where the bounds do not decide) and take them out of ``est``."""
    sh = queries.shared
    size = int(sh.indptr[state.l1] - sh.indptr[state.l0])
    if not size:
        return
    out_p, out_f = np.empty(size, np.int64), np.empty(size, np.uint8)
    used = fold_shared_estimates(sh.indptr, sh.cols, sh.vals, state.l0, est, err,
                                 _NO_JUNK if colmask is None else colmask, col0, state.pessimistic,
                                 state.thr_start, state.thr_sorted, state.hist, state.best, state.best_idx,
                                 np.ascontiguousarray(queries.scale[state.l0:state.l1], dtype=np.float64),
                                 queries.params.lambda_value, out_p, out_f)
    if used:
        p = out_p[:used]
        r = np.searchsorted(sh.indptr, p, side="right") - 1 - state.l0
        c = sh.cols[p] - col0
        values = -queries.final(canonical_pairs(queries.normalized[state.l0:state.l1], tile, r, c),
                                r + state.l0, jaccard(sh.vals[p]))
        fold_settled(r, c + col0, out_f[:used], values, state.pessimistic, state.thr_start, state.thr_sorted,
                     state.hist, state.best, state.best_idx)


def fold_plain(queries: RerankQueries, state: ScoreState, est: np.ndarray, tile: np.ndarray, col0: int,
               colmask: np.ndarray | None, err: np.ndarray) -> None:
    """Count the tile's remaining pairs (no shared term: jaccard = 1) from their estimates (``fold_estimates``),
    and fold the undecided ones at exact final distances from canonical cosines."""
    n, width = est.shape
    junk = _NO_JUNK if colmask is None else colmask
    scale = np.ascontiguousarray(queries.scale[state.l0:state.l1], dtype=np.float64)
    size = max(4 * width, 64 * n)
    out_r, out_c = np.empty(size, np.int64), np.empty(size, np.int64)
    out_f = np.empty(size, np.uint8)
    row = 0
    while row < n:
        used, row = fold_estimates(est, err, junk, col0, state.pessimistic, state.thr_start, state.thr_sorted,
                                   state.hist, state.best, state.best_idx, scale, queries.params.lambda_value,
                                   row, out_r, out_c, out_f)
        if used:
            r, c = out_r[:used], out_c[:used]
            cos = canonical_pairs(queries.normalized[state.l0:state.l1], tile, r, c)
            values = -queries.final(cos, r + state.l0, np.ones(used))
            fold_settled(r, c + col0, out_f[:used], values, state.pessimistic, state.thr_start, state.thr_sorted,
                         state.hist, state.best, state.best_idx)


RERANK = RerankScan()


def with_cosines(queries: RerankQueries, truth: Truth, source: Gallery, ranked: Ranked) -> Ranked:
    """``ranked`` with cosine scores reported (rank 1's, and the best relevant one) and rank 1's re-ranked
    distance kept as ``rerank_distance``."""
    n = len(queries.normalized)
    ranked.rerank_distance = ranked.top1_score
    top1_cos = np.full(n, np.nan)
    has = np.flatnonzero(ranked.top1 >= 0)
    if len(has):
        items = ranked.top1[has]
        whole = whole_rows(source)
        if whole is not None:
            top1_cos[has] = canonical_pairs(queries.normalized, whole, has, items)
        else:
            union, inverse = np.unique(items, return_inverse=True)
            top1_cos[has] = canonical_pairs(queries.normalized, source.rows(union), has, inverse.reshape(-1))
    ranked.top1_score = top1_cos
    best = np.full(n, np.nan)
    if queries.cosines is not None and len(queries.cosines):
        rows = segment_ids(truth.rel_indptr)
        best_cos = np.full(n, -np.inf)
        np.maximum.at(best_cos, rows, queries.cosines.astype(np.float64))
        best = np.where(np.isfinite(best_cos), best_cos, np.nan)
    ranked.relevant_score = best
    return ranked
