"""Exact top-k search: each row's k nearest columns and its farthest one, on canonical scores.

The second kind of scan (``base.SearchBackend``): instead of counting
negatives against thresholds, it keeps, per row, the k columns with the
highest canonical score (README, "The canonical score"), ties to the lower
column index (CONTRACT §4's rank-1 rule applied at every position), and the
column with the lowest canonical score (the farthest item, ties to the lower
index), which re-ranking needs for its per-row scaling.

How, per tile of rows x columns: a float32 product gives estimates v, each
within e = score_error(D) ||r|| ||c|| + error_floor(D) of the canonical score.
A column can enter a row's top k only when v >= T - e, where T (the row's
running bar) is the lowest canonical score of its current k best, or the
k-th highest estimate of the tile minus e, whichever is higher; both are
below the final k-th canonical score. Only those candidates get canonical
scores, while the tile is in memory, and are merged into the row's list.
The farthest column the same way, mirrored. Memory: one tile and (rows, k).
States of disjoint column ranges merge, so a search runs over column ranges
on threads or over row ranges as separate tasks, with the same result.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

from evalcore.core.canonical import canonical_pairs
from evalcore.core.scan.base import TILE_COLS, TILE_ROWS, Span, column_spans
from evalcore.core.scan.embeddings import (
    as_reported,
    check_euclidean_norms,
    error_floor,
    euclidean_floor,
    pair_scores,
    row_norms,
    score_error,
    tile_scores,
)

#: the id that pads a list that is not full yet: it loses every tie
NO_ID = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Neighbors:
    """Rows ``r0 ..``: ``ids`` (n, k) the k nearest columns best first and ``scores`` their canonical scores
    (float32; under euclidean their squared distances, ascending); ``far_ids`` (n,) the farthest column and
    ``far_scores`` its score (distance)."""

    r0: int
    ids: np.ndarray
    scores: np.ndarray
    far_ids: np.ndarray
    far_scores: np.ndarray


@dataclass(frozen=True)
class RowBlock:
    """Rows to search for: normalised float32 rows, the first one's global index ``r0``, ``k``, and the
    similarity (euclidean: nearest by squared distance, ``embeddings.pair_scores``)."""

    rows: np.ndarray
    r0: int
    k: int
    similarity: str = "cosine"


class ArrayColumns:
    """Columns held as one array of normalised rows (``base.Columns``), read in blocks of whole tiles."""

    def __init__(self, rows: np.ndarray, block_rows: int = 8 * TILE_COLS):
        self.array = rows
        self.block_rows = block_rows

    @property
    def n_rows(self) -> int:
        return len(self.array)

    def blocks(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        stop = self.n_rows if stop is None else stop
        for b0 in range(start, stop, self.block_rows):
            yield b0, self.array[b0:min(stop, b0 + self.block_rows)]


@njit(cache=True, nogil=True)
def _candidates(est, near_last, far_best, err, k, r, c, fr, fc):  # pragma: no cover - compiled
    width = est.shape[1]
    best = np.empty(k, dtype=np.float64)
    near = np.empty(width, dtype=np.int64)
    far = np.empty(width, dtype=np.int64)
    n = 0
    m = 0
    for i in range(est.shape[0]):
        floor = np.float64(near_last[i]) - err[i]
        ceiling = np.float64(far_best[i]) + err[i]
        # one pass: the k highest estimates at or above the running bar (descending, by insertion: after the
        # first tiles few values pass it), the lowest estimate, and the columns past either running bar
        n_best = 0
        n_near = 0
        n_far = 0
        low = np.inf
        for j in range(width):
            v = np.float64(est[i, j])
            if v < low:
                low = v
            if v <= ceiling:
                far[n_far] = j
                n_far += 1
            if v >= floor:
                near[n_near] = j
                n_near += 1
                if n_best < k or v > best[k - 1]:
                    at = n_best if n_best < k else k - 1
                    while at > 0 and best[at - 1] < v:
                        best[at] = best[at - 1]
                        at -= 1
                    best[at] = v
                    if n_best < k:
                        n_best += 1
        bar = max(floor, best[k - 1] - 2 * err[i]) if n_best == k else floor
        top = min(ceiling, low + 2 * err[i])
        if n + n_near > r.shape[0] or m + n_far > fr.shape[0]:
            return -1, -1
        for x in range(n_near):
            if np.float64(est[i, near[x]]) >= bar:
                r[n] = i
                c[n] = near[x]
                n += 1
        for x in range(n_far):
            if np.float64(est[i, far[x]]) <= top:
                fr[m] = i
                fc[m] = far[x]
                m += 1
    return n, m


def candidates(est: np.ndarray, near_last: np.ndarray, far_best: np.ndarray, err: np.ndarray,
               k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns) of the tile that may enter a row's k best, then those that may be its farthest.

    Near: estimate >= bar = max(s_k - e, v_k - 2e), s_k the row's current k-th canonical score (-inf while
    its list is short), v_k the tile's k-th highest estimate; far: estimate <= min(s_far + e, v_min + 2e).
    Both bounds stay on the safe side of the final scores (module docstring).
    """
    size = est.shape[0] * (2 * k + 16)
    while True:
        r, c = np.empty(size, np.int64), np.empty(size, np.int64)
        fr, fc = np.empty(size, np.int64), np.empty(size, np.int64)
        got, far = _candidates(est, near_last, far_best, err, k, r, c, fr, fc)
        if got >= 0:
            return r[:got], c[:got], fr[:far], fc[:far]
        size = est.size  # many equal estimates (duplicate rows): room for every pair


@njit(cache=True, nogil=True)
def _insert_near(ids, scores, r, new_ids, new_scores):  # pragma: no cover - compiled
    """Insert each (row, id, score) into the row's list, kept best first: higher score, then lower id."""
    k = ids.shape[1]
    for p in range(len(r)):
        i = r[p]
        s = new_scores[p]
        g = new_ids[p]
        last_s = scores[i, k - 1]
        if s < last_s or (s == last_s and g >= ids[i, k - 1]):
            continue
        at = k - 1
        while at > 0 and (scores[i, at - 1] < s or (scores[i, at - 1] == s and ids[i, at - 1] > g)):
            scores[i, at] = scores[i, at - 1]
            ids[i, at] = ids[i, at - 1]
            at -= 1
        scores[i, at] = s
        ids[i, at] = g


@njit(cache=True, nogil=True)
def _insert_far(far_ids, far_scores, r, new_ids, new_scores):  # pragma: no cover - compiled
    """Keep each row's farthest column: lower score, then lower id."""
    for p in range(len(r)):
        i = r[p]
        s = new_scores[p]
        if s < far_scores[i] or (s == far_scores[i] and new_ids[p] < far_ids[i]):
            far_scores[i] = s
            far_ids[i] = new_ids[p]


class TopKState:
    """One tile of rows: the current k best (ids, canonical scores) and the farthest column so far."""

    def __init__(self, rows: np.ndarray, k: int, similarity: str = "cosine"):
        n = len(rows)
        self.rows = rows
        self.k = k
        self.similarity = similarity
        self.norms = row_norms(rows)
        #: euclidean: the rows' squared norms in float32, for the estimates (``embeddings.tile_scores``)
        self.squares = (self.norms ** 2).astype(np.float32) if similarity == "euclidean" else None
        self.ids = np.full((n, k), NO_ID, dtype=np.int64)
        self.scores = np.full((n, k), -np.inf, dtype=np.float32)
        self.far_ids = np.full(n, NO_ID, dtype=np.int64)
        self.far_scores = np.full(n, np.inf, dtype=np.float32)

    def update(self, est: np.ndarray, col0: int, cols: np.ndarray, col_norm: float) -> None:
        """Fold one tile: ``est`` the float32 estimates of these rows against columns ``col0 ..`` (``cols``,
        whose largest norm is ``col_norm``)."""
        dims = self.rows.shape[1]
        if self.similarity == "euclidean":  # estimates of -||r - c||^2 (``embeddings.euclidean_floor``)
            err = 2 * score_error(dims) * self.norms * col_norm + euclidean_floor(dims, self.norms, col_norm)
        else:
            err = score_error(dims) * self.norms * col_norm + error_floor(dims)
        r, c, fr, fc = candidates(est, self.scores[:, -1], self.far_scores, err, self.k)
        if len(r):
            _insert_near(self.ids, self.scores, r, c + col0, pair_scores(self.rows, cols, r, c, self.similarity))
        if len(fr):
            _insert_far(self.far_ids, self.far_scores, fr, fc + col0,
                        pair_scores(self.rows, cols, fr, fc, self.similarity))

    def merge(self, other: TopKState) -> None:
        """Add the state of the same rows over another, disjoint range of columns."""
        n, k = other.ids.shape
        _insert_near(self.ids, self.scores, np.repeat(np.arange(n), k), other.ids.reshape(-1),
                     other.scores.reshape(-1))
        _insert_far(self.far_ids, self.far_scores, np.arange(n), other.far_ids, other.far_scores)


class NeighborSearch:
    """The search backend (``base.SearchBackend``): exact top-k and farthest column per row (module docstring).
    Its source is a ``base.Columns`` of normalised rows (an ``ArrayColumns``, or a gallery's blocks)."""

    name = "neighbors"

    def new_states(self, queries: RowBlock) -> list[TopKState]:
        states = [TopKState(queries.rows[t0:t0 + TILE_ROWS], queries.k, queries.similarity)
                  for t0 in range(0, len(queries.rows), TILE_ROWS)]
        if queries.similarity == "euclidean":
            for t, state in enumerate(states):
                check_euclidean_norms("query/emb", queries.r0 + t * TILE_ROWS, state.norms)
        return states

    def scan(self, queries: RowBlock, states: list[TopKState], source, span: Span | None) -> None:
        blocks = source.blocks() if span is None else source.blocks(*span)
        with threadpool_limits(limits=1, user_api="blas"):
            for g0, block in blocks:
                for c0 in range(0, len(block), TILE_COLS):
                    cols = block[c0:c0 + TILE_COLS]
                    norms = row_norms(cols)
                    col_norm = float(norms.max())
                    squares = None
                    if queries.similarity == "euclidean":
                        check_euclidean_norms("gallery/emb", g0 + c0, norms)
                        squares = (norms ** 2).astype(np.float32)
                    for state in states:
                        est = np.empty((len(state.rows), len(cols)), dtype=np.float32)
                        state.update(tile_scores(state.rows, cols, est, state.squares, squares), g0 + c0, cols,
                                     col_norm)

    def merge(self, parts: list[list[TopKState]]) -> list[TopKState]:
        merged = parts[0]
        for other in parts[1:]:
            for mine, theirs in zip(merged, other):
                mine.merge(theirs)
        return merged

    def finish(self, queries: RowBlock, states: list[TopKState]) -> Neighbors:
        if not states:
            empty = np.empty((0, queries.k))
            return Neighbors(queries.r0, empty.astype(np.int64), empty.astype(np.float32),
                             np.empty(0, np.int64), np.empty(0, np.float32))
        return Neighbors(queries.r0, np.concatenate([s.ids for s in states]),
                         as_reported(np.concatenate([s.scores for s in states]), queries.similarity),
                         np.concatenate([s.far_ids for s in states]),
                         as_reported(np.concatenate([s.far_scores for s in states]), queries.similarity))


NEIGHBORS = NeighborSearch()


def search(rows: np.ndarray, r0: int, source, k: int, *, threads: int = 1, map_fn=map,
           similarity: str = "cosine") -> Neighbors:
    """The k nearest columns of ``source`` (and the farthest) for normalised ``rows`` (global index ``r0 ..``);
    ``threads > 1`` splits the columns into that many ranges through ``map_fn`` and merges them. Euclidean:
    nearest by squared distance, reported as such."""
    queries = RowBlock(np.ascontiguousarray(rows, dtype=np.float32), r0, k, similarity)

    def part(span: Span | None) -> list[TopKState]:
        states = NEIGHBORS.new_states(queries)
        NEIGHBORS.scan(queries, states, source, span)
        return states

    spans = column_spans(source.n_rows, threads) if threads > 1 else []
    states = part(None) if len(spans) <= 1 else NEIGHBORS.merge(list(map_fn(part, spans)))
    return NEIGHBORS.finish(queries, states)


def concat(parts: list[Neighbors]) -> Neighbors:
    """Consecutive row ranges' results as one."""
    return Neighbors(parts[0].r0, np.concatenate([p.ids for p in parts]), np.concatenate([p.scores for p in parts]),
                     np.concatenate([p.far_ids for p in parts]), np.concatenate([p.far_scores for p in parts]))


# --------------------------------------------------------------------------- one set of rows against itself


@dataclass(frozen=True)
class Mirrored:
    """Candidates a symmetric task found for later rows among its own rows (as columns), not yet scored:
    (row, column, float32 estimate) for the nearest lists, then for the farthest. Global ids."""

    rows: np.ndarray
    cols: np.ndarray
    est: np.ndarray
    far_rows: np.ndarray
    far_cols: np.ndarray
    far_est: np.ndarray


@njit(cache=True, nogil=True)
def _mirrored(est, lo, err, k, r, c, fr, fc):  # pragma: no cover - compiled
    width = est.shape[1] - lo
    best = np.full((width, k), -np.inf)
    kth = np.full(width, -np.inf)
    low = np.full(width, np.inf)
    # first pass, row by row (the product's own layout, no transpose): each column's k highest and its lowest
    for i in range(est.shape[0]):
        for j in range(width):
            v = np.float64(est[i, lo + j])
            if v < low[j]:
                low[j] = v
            if v > kth[j]:
                at = k - 1
                while at > 0 and best[j, at - 1] < v:
                    best[j, at] = best[j, at - 1]
                    at -= 1
                best[j, at] = v
                kth[j] = best[j, k - 1]
    n = 0
    m = 0
    for i in range(est.shape[0]):
        for j in range(width):
            v = np.float64(est[i, lo + j])
            if v >= kth[j] - 2 * err[j]:
                if n == r.shape[0]:
                    return -1, -1
                r[n] = j
                c[n] = i
                n += 1
            if v <= low[j] + 2 * err[j]:
                if m == fr.shape[0]:
                    return -1, -1
                fr[m] = j
                fc[m] = i
                m += 1
    return n, m


def mirrored_candidates(est: np.ndarray, lo: int, err: np.ndarray,
                        k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``candidates`` of the transposed tile ``est[:, lo:].T`` (rows: the tile's columns from ``lo``; columns: its
    rows), with no bars carried in, read in the tile's own layout: (rows, columns) that may enter a row's k
    best (estimate >= the row's k-th highest - 2e), then those that may be its farthest (<= its lowest + 2e)."""
    size = (est.shape[1] - lo) * (k + 16)
    while True:
        r, c = np.empty(size, np.int64), np.empty(size, np.int64)
        fr, fc = np.empty(size, np.int64), np.empty(size, np.int64)
        got, far = _mirrored(est, lo, err, k, r, c, fr, fc)
        if got >= 0:
            return r[:got], c[:got], fr[:far], fc[:far]
        size = est.shape[0] * (est.shape[1] - lo)  # many equal estimates (duplicate rows): room for every pair


def search_upper(rows: np.ndarray, a0: int, a1: int, k: int, kept: np.ndarray | None = None,
                 n_query: int = 0) -> tuple[Neighbors, Mirrored]:
    """One task of the symmetric search of ``rows`` (normalised float32) against themselves: rows a0..a1
    against columns a0..N, exactly (their ``Neighbors`` over those columns), and, from the same products
    transposed, every pair (r, c) with r >= a1 and a0 <= c < a1 that may still enter r's lists.

    Each product tile serves both its rows and its columns, so the whole search multiplies (N^2 + N·B)/2
    pairs instead of N^2 (B the task's rows). A mirrored pair is kept when its estimate is within 2e of the
    row's k-th highest (or lowest) estimate over this task's columns: any other has k columns of this task
    with strictly higher (lower) canonical scores, so it can be in neither list. ``merge_mirrored`` settles the
    kept ones against the row's own task's result.

    ``kept`` (rows a0 .. a0 + len(kept), all below ``n_query``, by the columns from ``n_query`` on) receives
    the float32 estimates of those pairs as the tiles pass: re-ranking's query x gallery scan counts from
    estimates, so it can take these instead of multiplying the same rows again.
    """
    block = np.ascontiguousarray(rows[a0:a1])
    states = [TopKState(block[t0:t0 + TILE_ROWS], k) for t0 in range(0, len(block), TILE_ROWS)]
    dims = rows.shape[1]
    block_norm = float(row_norms(block).max()) if len(block) else 0.0
    found: list[tuple[np.ndarray, ...]] = []
    with threadpool_limits(limits=1, user_api="blas"):
        for c0 in range(a0, len(rows), TILE_COLS):
            cols = rows[c0:c0 + TILE_COLS]
            norms = row_norms(cols)
            est = np.matmul(block, cols.T)
            if kept is not None and c0 + len(cols) > n_query:
                g0 = max(c0, n_query)
                kept[:, g0 - n_query:c0 + len(cols) - n_query] = est[:len(kept), g0 - c0:]
            for t, state in enumerate(states):
                state.update(est[t * TILE_ROWS:(t + 1) * TILE_ROWS], c0, cols, float(norms.max()))
            lo = max(c0, a1) - c0  # the columns after this task's rows: rows of the mirrored pairs
            if lo < len(cols):
                err = score_error(dims) * norms[lo:] * block_norm + error_floor(dims)
                r, c, fr, fc = mirrored_candidates(est, lo, err, k)
                found.append((r + c0 + lo, c + a0, est[c, r + lo], fr + c0 + lo, fc + a0, est[fc, fr + lo]))
    near = NEIGHBORS.finish(RowBlock(block, a0, k), states)
    parts = list(zip(*found)) if found else [[np.empty(0, np.int64)]] * 2 + [[np.empty(0, np.float32)]] + \
        [[np.empty(0, np.int64)]] * 2 + [[np.empty(0, np.float32)]]
    r, c, v, fr, fc, fv = (np.concatenate(p) for p in parts)
    return near, Mirrored(r, c, v, fr, fc, fv)


def split_mirrored(m: Mirrored, starts: np.ndarray) -> list[Mirrored]:
    """``m`` cut into the row ranges that begin at ``starts`` (ascending; the last runs to the end)."""
    near, far = np.argsort(m.rows, kind="stable"), np.argsort(m.far_rows, kind="stable")
    at = np.searchsorted(m.rows[near], starts[1:])
    far_at = np.searchsorted(m.far_rows[far], starts[1:])
    return [Mirrored(*(x[i] for x in (m.rows, m.cols, m.est)), *(x[j] for x in (m.far_rows, m.far_cols, m.far_est)))
            for i, j in zip(np.split(near, at), np.split(far, far_at))]


def symmetric_search(rows: np.ndarray, k: int, size: int, map_fn=map, run=None) -> Neighbors:
    """Every row's k nearest rows of ``rows`` and its farthest (the rows normalised float32), exactly, as
    ``search`` against ``ArrayColumns(rows)`` finds them, from half the products: ``search_upper`` over row
    ranges of ``size`` (through ``run``, a function of the ranges, when given: e.g. cluster tasks; else
    ``map_fn``), then each range completed by ``merge_mirrored`` (through ``map_fn``)."""
    spans = [(a, min(len(rows), a + size)) for a in range(0, len(rows), size)]
    if not spans:
        return NEIGHBORS.finish(RowBlock(rows, 0, k), [])
    done = run(spans) if run is not None else list(map_fn(lambda s: search_upper(rows, s[0], s[1], k), spans))
    starts = np.array([a for a, _ in spans], np.int64)
    pieces = [split_mirrored(m, starts) for _, m in done]
    return concat(list(map_fn(lambda j: merge_mirrored(rows, done[j][0], [p[j] for p in pieces[:j]]),
                              range(len(spans)))))


def merge_mirrored(rows: np.ndarray, own: Neighbors, mirrored: list[Mirrored]) -> Neighbors:
    """``own`` (rows r0.. of ``rows`` against columns r0..N, from ``search_upper``) completed with the mirrored
    candidates of earlier tasks: those within e of the row's current k-th (or farthest) canonical score get
    canonical scores and are inserted (the same insertions as the one-sided search, so the same lists)."""
    n, k = own.ids.shape
    r0, r1 = own.r0, own.r0 + n
    ids, scores = own.ids.copy(), own.scores.copy()
    far_ids, far_scores = own.far_ids.copy(), own.far_scores.copy()
    dims = rows.shape[1]
    norms = row_norms(rows)
    err = score_error(dims) * norms[r0:r1].astype(np.float64) * float(norms.max()) + error_floor(dims)
    for m in mirrored:
        mine = (m.rows >= r0) & (m.rows < r1)
        r, c, v = m.rows[mine] - r0, m.cols[mine], m.est[mine].astype(np.float64)
        keep = v >= scores[r, k - 1].astype(np.float64) - err[r]
        if keep.any():
            _insert_near(ids, scores, r[keep], c[keep], canonical_pairs(rows[r0:r1], rows, r[keep], c[keep]))
        mine = (m.far_rows >= r0) & (m.far_rows < r1)
        r, c, v = m.far_rows[mine] - r0, m.far_cols[mine], m.far_est[mine].astype(np.float64)
        keep = v <= far_scores[r].astype(np.float64) + err[r]
        if keep.any():
            _insert_far(far_ids, far_scores, r[keep], c[keep], canonical_pairs(rows[r0:r1], rows, r[keep], c[keep]))
    return Neighbors(r0, ids, scores, far_ids, far_scores)
