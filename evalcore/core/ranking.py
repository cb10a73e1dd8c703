"""Blocked scores -> ranks of the relevant items and the rank-1 item (README, How it works).

No Q x G matrix and no sort of gallery scores. For each query the rank of its
k-th best relevant item is

    r_k = k + #{ non-junk, non-relevant g : c(g) beats c_k }

where c is the canonical score (``core.canonical``: the float32 nearest to
the exact dot product of the two normalised rows) and "beats" is ``>=``
under pessimistic ties and ``>`` under optimistic ones.

Exactness. The thresholds c_k are computed canonically before the scan.
Matrix products on a fixed tile grid (``TILE_ROWS`` x ``TILE_COLS``, one BLAS
thread) give estimates v of every other pair's score, each within a
rigorous bound e of the exact dot product (``score_error``). A negative
whose interval [v - e, v + e] decides every comparison is counted at once
(``kernels.fold_tile``); the few it cannot decide, and the candidates for
rank 1, get canonical scores from their rows (``kernels.fold_settled``).
So every comparison that decides a rank, a tie or the rank-1 item is made on
canonical scores, and results depend on neither the tile a pair sits in nor
the BLAS library. Shards of the gallery add their counts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from evalcore.core.canonical import canonical_block, canonical_pairs, compact, first_identical
from evalcore.core.kernels import NEAR, fold_settled, fold_tile
from evalcore.core.protocols import Truth, segment_ids
from evalcore.errors import InputError, rows_text

TILE_ROWS = 512
TILE_COLS = 4096
#: float32 unit roundoff
U32 = 2.0 ** -24
NEG_INF = np.float32(-np.inf)
_NO_JUNK = np.zeros(0, dtype=bool)


@dataclass
class Ranked:
    """What the metrics need, for the queries of one chunk.

    ``ranks[indptr[i]:indptr[i+1]]`` are query i's relevant ranks r_1 < r_2 < ...
    (only the ranked ones for precomputed lists); ``n_relevant`` is R.
    """

    indptr: np.ndarray
    ranks: np.ndarray
    n_relevant: np.ndarray
    top1: np.ndarray          # gallery index of rank 1, -1 if nothing is ranked
    top1_score: np.ndarray    # float64, NaN if unknown
    relevant_score: np.ndarray  # best score of a relevant item, NaN if none
    near_ties: int = 0        # negatives whose estimate left a comparison open, settled canonically


# --------------------------------------------------------------------------- scores


def row_norms(x: np.ndarray) -> np.ndarray:
    """||x|| per row, summed in float64 (NaN or Inf when the row has one; 0 for a zero row)."""
    return np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))


#: float32's largest finite value and its smallest normal one
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)


def normalize_rows(x: np.ndarray, similarity: str, norms: np.ndarray | None = None,
                   copy: bool = True) -> np.ndarray:
    """float32 rows, L2-normalised under ``cosine``: x * (1 / ||x||), the norm summed in float64.

    Row-wise and elementwise only, so a row's result does not depend on which
    other rows share the block. ``copy=False`` normalises a float32 array in place.

    The scale 1/||x|| is applied in float32 when it is a normal float32
    number. For a row of tiny values (||x|| < 2**-128, e.g. subnormal entries,
    where 1/||x|| overflows float32 to Inf) or of huge ones (1/||x|| below
    float32's normal range, losing bits), the row is divided in float64 and
    rounded once: its exact direction, so any non-zero finite row has a
    well-defined cosine and no input error is needed for it.
    """
    x = np.array(x, dtype=np.float32, order="C", copy=True) if copy or x.dtype != np.float32 \
        else np.ascontiguousarray(x)
    if similarity == "cosine":
        norms = row_norms(x) if norms is None else norms
        scale = 1.0 / norms
        odd = np.flatnonzero((norms > 0) & ~((scale >= F32_TINY) & (scale <= F32_MAX)))
        if odd.size:
            exact = (x[odd].astype(np.float64) / norms[odd, None]).astype(np.float32)
            scale[odd] = 1.0
        x *= scale.astype(np.float32)[:, None]
        if odd.size:
            x[odd] = exact
    return x


def dot_limit(dims: int) -> float:
    """The largest ||q|| * ||g|| for which no float32 score of the pair can overflow (``--similarity dot``).

    Every partial sum of a float32 dot product, in any order, is at most
    sum |q_k g_k| (1 + gamma_D) <= ||q|| ||g|| (1 + gamma_D) (Cauchy-Schwarz),
    and the score bands (``score_bounds``) add 2 gamma_D + 16u around it; so
    ||q|| ||g|| (1 + 4 gamma_D + 32u) < float32 max keeps every number finite.
    """
    gamma = dims * U32 / (1 - dims * U32)
    return F32_MAX / (1 + 4 * gamma + 32 * U32)


def dot_overflow_rows(query_norms: np.ndarray, gallery_norms: np.ndarray,
                      dims: int) -> tuple[np.ndarray, np.ndarray]:
    """(query rows, gallery rows) that take part in a pair with ||q|| ||g|| >= ``dot_limit(dims)``."""
    none = np.empty(0, dtype=np.int64)
    if not len(query_norms) or not len(gallery_norms):
        return none, none
    limit = dot_limit(dims)
    qmax, gmax = float(np.max(query_norms)), float(np.max(gallery_norms))
    if qmax * gmax < limit:
        return none, none
    return np.flatnonzero(query_norms * gmax >= limit), np.flatnonzero(gallery_norms * qmax >= limit)


def score_error(dims: int) -> float:
    """Relative bound on how far a matrix-product score can be from the exact dot product, plus one ulp.

    Any float32 summation of D products, in any order and with or without
    FMA, is within gamma_D * sum_k |q_k g_k| <= gamma_D ||q|| ||g|| of the
    exact dot product (Cauchy-Schwarz); a float32 ulp of a number of that
    size is at most 2**-23 ||q|| ||g||. So e = score_error(D) ||q|| ||g||
    + ``error_floor(D)`` bounds both the estimate's error and one rounding
    step, which is what deciding on canonical scores needs.
    """
    gamma = dims * U32 / (1 - dims * U32)
    return (gamma + 2.0 ** -22) * (1 + 1e-6)


def error_floor(dims: int) -> float:
    """Absolute slack for products that underflow float32 (even when flushed to zero) and subnormal ulps."""
    return dims * 2.0 ** -125 + 2.0 ** -148


#: ||g|| of a cosine-normalised row is at most this (1 + a few float32 roundoffs)
UNIT_NORM = 1 + 1e-6


def tie_boundaries(thresholds: np.ndarray, ties: str) -> np.ndarray:
    """float64 m(t) per float32 threshold t: a pair whose exact score x > m(t) beats t, one with x < m(t) does not.

    Pessimistic (a tie goes to the negative, canonical c >= t beats):
    m = midpoint of t and the float32 below it. Optimistic (c > t beats):
    midpoint of t and the float32 above it. Monotone in t, so sorted
    thresholds give sorted boundaries. x == m is left to the exact pass.
    """
    t = np.asarray(thresholds, dtype=np.float32)
    other = np.nextafter(t, np.float32(-np.inf) if ties == "pessimistic" else np.float32(np.inf))
    return (t.astype(np.float64) + other.astype(np.float64)) / 2


# --------------------------------------------------------------------------- state


class _TileState:
    """One query tile: canonical thresholds, counts of beaten thresholds, and rank 1.

    The tile's queries are chunk rows ``r0 .. r1`` sitting at tile rows
    ``l0 .. l0 + (r1 - r0)``; their pairs are contiguous slices of the CSR lists.
    ``thresholds`` are the canonical scores of the chunk's relevant pairs (CSR
    order), ``qerr`` the per-row error factor (``score_error`` * ||q||).
    """

    def __init__(self, truth: Truth, r0: int, r1: int, l0: int, thresholds: np.ndarray, ties: str,
                 qerr: np.ndarray):
        n = r1 - r0
        self.l0, self.l1 = l0, l0 + n
        self.pessimistic = ties == "pessimistic"
        p0, p1 = truth.rel_indptr[r0], truth.rel_indptr[r1]
        self.counts = np.diff(truth.rel_indptr[r0:r1 + 1])
        self.row_start = truth.rel_indptr[r0:r1 + 1] - p0
        self.pair_row = segment_ids(self.row_start)
        self.pair_col = truth.rel_items[p0:p1]
        self.rel_by_col = np.argsort(self.pair_col, kind="stable")
        self.rel_cols_sorted = self.pair_col[self.rel_by_col]
        j0, j1 = truth.junk_indptr[r0], truth.junk_indptr[r1]
        junk_row = segment_ids(truth.junk_indptr[r0:r1 + 1] - j0)
        junk_col = truth.junk_items[j0:j1]
        order = np.argsort(junk_col, kind="stable")
        self.junk_row, self.junk_col = junk_row[order], junk_col[order]
        self.exact = np.asarray(thresholds[p0:p1], dtype=np.float32)
        # thresholds ascending within each row, and their boundaries for the fold
        by_value = np.lexsort((self.exact, self.pair_row))
        self.thr_sorted = np.ascontiguousarray(self.exact[by_value])
        self.bounds = tie_boundaries(self.thr_sorted, ties)
        self.qerr = np.ascontiguousarray(qerr[r0:r1], dtype=np.float64)
        self.hist = np.zeros(p1 - p0, dtype=np.int64)
        self.low = np.full(n, -np.inf, dtype=np.float64)      # largest (score - error) seen: rank 1 is >= it
        self.best = np.full(n, -np.inf, dtype=np.float32)     # canonical rank-1 score among negatives
        self.best_idx = np.full(n, -1, dtype=np.int64)
        self.n_near = 0
        self.dense = False    # most pairs need canonical scores: compute them first (``update_canonical``)
        self.n = n
        # scratch for the kernel, reused across tiles
        self._out_idx: np.ndarray | None = None
        self._out_flag: np.ndarray | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_out_idx"] = state["_out_flag"] = None  # scratch does not travel between workers
        return state

    def update(self, scores: np.ndarray, col0: int, colmask: np.ndarray | None, qtile: np.ndarray,
               gtile: GalleryTile, floor: float) -> None:
        """Fold one tile of score estimates (query tile x gallery tile from ``col0``) into the state.

        Pairs the estimates cannot decide get canonical scores from their rows
        (``qtile`` and ``gtile``, the tile's operands). When most of a tile's
        pairs were undecided (a constant or collapsed submission), the state
        turns ``dense``: its next tiles come canonical from the start
        (``update_canonical``), which saves the estimate and the second pass.
        """
        sub = scores[self.l0:self.l1]
        k, out_idx, out_flag = self._fold(sub, col0, colmask, self.qerr, gtile.norms, gtile.max_norm, floor)
        if k:
            width = sub.shape[1]
            rows, cols = np.divmod(out_idx[:k], width)
            flags = out_flag[:k]
            # many pairs (a constant or collapsed submission): identical gallery rows share one score
            rep = gtile.representatives()[cols] if k > width else cols
            canon = canonical_pairs(qtile, gtile.rows, rows + self.l0, rep)
            fold_settled(rows, cols + col0, flags, canon, self.pessimistic, self.row_start, self.thr_sorted,
                         self.hist, self.best, self.best_idx)
            self.n_near += int(np.count_nonzero(flags & NEAR))
            self.dense = 2 * k > sub.size

    def update_canonical(self, col0: int, colmask: np.ndarray | None, qtile: np.ndarray, gtile: GalleryTile) -> None:
        """Fold one tile from canonical scores computed for every pair (error 0: the fold decides all)."""
        distinct, position, rows64, norms64 = gtile.distinct_rows()
        sub = canonical_block(qtile[self.l0:self.l1], gtile.rows[distinct], rows64, norms64)
        if position is not None:
            sub = sub[:, position]
        n_exact = sub.size
        zero = np.zeros(self.n)
        k, out_idx, out_flag = self._fold(sub, col0, colmask, zero, gtile.norms, 0.0, 0.0)
        if k:
            rows, cols = np.divmod(out_idx[:k], sub.shape[1])
            fold_settled(rows, cols + col0, out_flag[:k], sub[rows, cols], self.pessimistic, self.row_start,
                         self.thr_sorted, self.hist, self.best, self.best_idx)
        self.n_near += n_exact

    def _fold(self, sub: np.ndarray, col0: int, colmask: np.ndarray | None, qerr: np.ndarray, gnorm: np.ndarray,
              gmax: float, floor: float) -> tuple[int, np.ndarray, np.ndarray]:
        """Mask the tile's relevant and junk pairs, then one ``fold_tile`` pass; (emitted, their places, flags)."""
        width = sub.shape[1]
        col1 = col0 + width
        a, b = np.searchsorted(self.rel_cols_sorted, [col0, col1])
        if b > a:
            sel = self.rel_by_col[a:b]
            sub[self.pair_row[sel], self.pair_col[sel] - col0] = NEG_INF
        a, b = np.searchsorted(self.junk_col, [col0, col1])
        if b > a:
            sub[self.junk_row[a:b], self.junk_col[a:b] - col0] = NEG_INF
        out_idx, out_flag = self._out_idx, self._out_flag
        if out_idx is None or out_flag is None or len(out_idx) < sub.size:
            out_idx = self._out_idx = np.empty(sub.size, dtype=np.int64)
            out_flag = self._out_flag = np.empty(sub.size, dtype=np.uint8)
        k = fold_tile(sub, _NO_JUNK if colmask is None else colmask, qerr, gnorm, gmax, floor, self.low,
                      self.row_start, self.bounds, self.hist, out_idx, out_flag)
        return k, out_idx, out_flag

    def merge(self, other: _TileState) -> None:
        """Add the state of the same queries over another, disjoint part of the gallery."""
        self.hist += other.hist
        self.n_near += other.n_near
        np.maximum(self.low, other.low, out=self.low)
        better = (other.best > self.best) | ((other.best == self.best) & (other.best_idx >= 0)
                                             & ((self.best_idx < 0) | (other.best_idx < self.best_idx)))
        self.best[better] = other.best[better]
        self.best_idx[better] = other.best_idx[better]

    def finish(self, ties: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Exact ranks (CSR by row, ascending), rank-1 item and score, best relevant score."""
        n = self.n
        # negatives beating the j-th smallest threshold = suffix sum of hist within the row
        total = len(self.hist)
        seg = np.repeat(np.arange(n, dtype=np.int64), self.counts)
        csum = np.cumsum(self.hist)
        end = self.row_start[1:][seg] - 1
        suffix = csum[end] - csum + self.hist if total else csum
        # position j (ascending thresholds) is relevant number k = R - (j - start) from the top
        j = np.arange(total, dtype=np.int64)
        k = self.row_start[1:][seg] - j
        rank_by_j = k + suffix
        ranks = rank_by_j[self.row_start[1:][seg] - 1 - (j - self.row_start[seg])] if total else rank_by_j
        # best relevant: highest canonical score, lowest index on ties (pairs are index-ascending)
        rel_best = np.full(n, -np.inf, dtype=np.float32)
        rel_idx = np.full(n, -1, dtype=np.int64)
        if total:
            np.maximum.at(rel_best, self.pair_row, self.exact)
            is_best = self.exact == rel_best[self.pair_row]
            first = np.full(n, total, dtype=np.int64)
            np.minimum.at(first, self.pair_row[is_best], np.nonzero(is_best)[0])
            has = first < total
            rel_idx[has] = self.pair_col[first[has]]
        take_rel = (rel_best > self.best) | ((rel_best == self.best) & (ties == "optimistic"))
        take_rel &= rel_idx >= 0
        top1 = np.where(take_rel, rel_idx, self.best_idx)
        top1_score = np.where(take_rel, rel_best, self.best).astype(np.float64)
        top1_score[top1 < 0] = np.nan
        rel_score = np.where(rel_idx >= 0, rel_best.astype(np.float64), np.nan)
        return ranks, top1, top1_score, rel_score, self.n_near


def threshold_scores(query_normalized: np.ndarray, truth: Truth, gallery,
                     pairs: np.ndarray | None = None) -> np.ndarray:
    """Canonical scores of the relevant pairs (CSR order of ``truth``): the thresholds ranks are counted against.

    ``pairs`` (indices into the CSR lists) limits the work to some pairs, e.g.
    those whose gallery item lies in one shard.
    """
    dims = query_normalized.shape[1]
    pair_row = segment_ids(truth.rel_indptr)
    items = truth.rel_items
    if pairs is not None:
        pair_row, items = pair_row[pairs], items[pairs]
    whole = getattr(gallery, "whole", None)
    if whole is not None:  # the normalised gallery is in memory as one array: index it, copy nothing
        return canonical_pairs(query_normalized, whole, pair_row, items)
    union, inverse = np.unique(items, return_inverse=True)
    rows = gallery.rows(union) if union.size else np.empty((0, dims), np.float32)
    return canonical_pairs(query_normalized, rows, pair_row, inverse.reshape(-1))


def query_tiles(query_normalized: np.ndarray, q0: int, n_query: int) -> list[tuple[int, int, np.ndarray]]:
    """(a, b, tile) for each TILE_ROWS-row tile the chunk touches: queries a..b inside a tile whose
    shape depends only on its place in the whole dataset, never on the chunk."""
    n, dims = query_normalized.shape
    n_query = max(n_query, q0 + n)
    out = []
    for t in range(q0 // TILE_ROWS, (q0 + n - 1) // TILE_ROWS + 1):
        a, b = max(q0, t * TILE_ROWS), min(q0 + n, (t + 1) * TILE_ROWS)
        tile = np.zeros((min(TILE_ROWS, n_query - t * TILE_ROWS), dims), dtype=np.float32)
        tile[a - t * TILE_ROWS:b - t * TILE_ROWS] = query_normalized[a - q0:b - q0]
        out.append((a, b, tile))
    return out


def new_states(tiles, q0: int, truth: Truth, thresholds: np.ndarray, ties: str,
               query_normalized: np.ndarray) -> list[_TileState]:
    qerr = score_error(query_normalized.shape[1]) * row_norms(query_normalized)
    return [_TileState(truth, a - q0, b - q0, a - (a // TILE_ROWS) * TILE_ROWS, thresholds, ties, qerr)
            for a, b, _ in tiles]


class GalleryTile:
    """One gallery tile's normalised rows, with what the fold needs of them computed once for all query tiles:
    row norms for the error bound (a constant under cosine), and, only when asked, identical rows."""

    def __init__(self, rows: np.ndarray, similarity: str):
        self.rows = rows
        if similarity == "cosine":
            self.norms, self.max_norm = np.full(len(rows), UNIT_NORM), UNIT_NORM
        else:
            self.norms = row_norms(rows)
            self.max_norm = float(self.norms.max()) if len(rows) else 0.0
        self._representatives: np.ndarray | None = None
        self._distinct: tuple | None = None

    def representatives(self) -> np.ndarray:
        """For each row, the first row of the tile identical to it."""
        if self._representatives is None:
            self._representatives = first_identical(self.rows)
        return self._representatives

    def distinct_rows(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """(indices of the distinct rows, each row's position among them or None when all differ, those rows
        widened to float64, their norms): what ``canonical_block`` needs, computed once for every query tile."""
        if self._distinct is None:
            distinct, position = compact(self.representatives(), len(self.rows))
            rows64 = self.rows[distinct].astype(np.float64)
            norms = np.sqrt(np.einsum("ij,ij->i", rows64, rows64))
            self._distinct = (distinct, None if len(distinct) == len(self.rows) else position, rows64, norms)
        return self._distinct


def tile_scores(qtile: np.ndarray, gtile: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The estimates of a tile's scores: one float32 matrix product. Any summation order will do (another
    BLAS library or device gives other last bits): every decision is made on canonical scores."""
    return np.matmul(qtile, gtile.T, out=out)


def scan_gallery(tiles, states: list[_TileState], blocks, gallery_junk: np.ndarray | None,
                 similarity: str = "cosine") -> None:
    """Fold every tile of the given gallery blocks into the states (one BLAS thread)."""
    buffers: dict = {}  # one score buffer per tile shape, reused: no fresh 4 MiB array per product
    floor = error_floor(tiles[0][2].shape[1]) if tiles else 0.0
    with threadpool_limits(limits=1, user_api="blas"):
        for g0, block in blocks:
            for c0 in range(0, len(block), TILE_COLS):
                col0 = g0 + c0
                rows = block[c0:c0 + TILE_COLS]  # the last tile is short, the same in every run
                gtile = GalleryTile(rows, similarity)
                colmask = tile_mask(col0, len(rows), gallery_junk)
                for (_, _, qtile), state in zip(tiles, states):
                    if state.dense:
                        state.update_canonical(col0, colmask, qtile, gtile)
                        continue
                    shape = (len(qtile), len(rows))
                    out = buffers.get(shape)
                    if out is None:
                        out = buffers[shape] = np.empty(shape, dtype=np.float32)
                    state.update(tile_scores(qtile, rows, out), col0, colmask, qtile, gtile, floor)


def merge_states(parts: list[list[_TileState]]) -> list[_TileState]:
    """States of the same query tiles over disjoint gallery shards, added up.

    Counts add, each relevant score was seen in exactly one shard, and rank 1
    is the highest canonical score, lowest index on ties.
    """
    merged = parts[0]
    for other in parts[1:]:
        for mine, theirs in zip(merged, other):
            mine.merge(theirs)
    return merged


def rank_by_embeddings(query: np.ndarray, q0: int, truth: Truth, gallery, *, n_query: int | None = None,
                       similarity: str = "cosine", ties: str = "pessimistic",
                       gallery_junk: np.ndarray | None = None, parts: int = 1, map_fn=map) -> Ranked:
    """Ranks of every relevant item for queries ``q0 .. q0+len(query)`` (global indices).

    ``gallery`` gives normalised float32 rows: ``gallery.blocks()`` yields
    ``(g0, rows g0..g1)`` in order with g0 a multiple of TILE_COLS, and
    ``gallery.rows(idx)`` the rows at sorted indices; ``gallery.n_rows`` is G;
    ``gallery.whole``, where not None, is all G normalised rows as one array.
    ``n_query`` (Q of the whole dataset) lets the last query tile be as short
    as it always is instead of padded; the last gallery tile likewise.
    Memory: the query chunk, one gallery block and one score tile.

    ``parts > 1`` scans that many column ranges of the gallery
    (``gallery.blocks(start, stop)``, ``start`` a multiple of TILE_COLS) through
    ``map_fn`` (a thread pool's ``map``: the product and the kernel release
    the GIL) and adds their states, as gallery shards do.
    """
    qn = normalize_rows(query, similarity)
    thresholds = threshold_scores(qn, truth, gallery)
    tiles = query_tiles(qn, q0, n_query or 0)

    def scan(span: tuple[int, int] | None) -> list[_TileState]:
        states = new_states(tiles, q0, truth, thresholds, ties, qn)
        scan_gallery(tiles, states, gallery.blocks() if span is None else gallery.blocks(*span), gallery_junk,
                     similarity)
        return states

    spans = column_spans(gallery.n_rows, parts) if parts > 1 else []
    states = scan(None) if len(spans) <= 1 else merge_states(list(map_fn(scan, spans)))
    return finish_states(states, truth, ties)


def column_spans(n_gallery: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` gallery ranges of whole score tiles, as equal as the tiles allow."""
    n_tiles = max(1, -(-n_gallery // TILE_COLS))
    parts = max(1, min(parts, n_tiles))
    edges = [round(i * n_tiles / parts) * TILE_COLS for i in range(parts + 1)]
    return [(a, min(b, n_gallery)) for a, b in zip(edges[:-1], edges[1:])]


def tile_mask(col0: int, width: int, gallery_junk: np.ndarray | None) -> np.ndarray | None:
    """Columns of the tile at ``col0`` that take no part: the gallery/junk items."""
    if gallery_junk is None:
        return None
    junk = gallery_junk[col0:col0 + width]
    return junk if junk.any() else None


def finish_states(states: list[_TileState], truth: Truth, ties: str) -> Ranked:
    """Exact ranks from the scanned states, concatenated in query order."""
    parts = [state.finish(ties) for state in states]
    ranks = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    return Ranked(indptr=truth.rel_indptr - truth.rel_indptr[0], ranks=ranks.astype(np.int64),
                  n_relevant=truth.n_relevant.astype(np.int64),
                  top1=np.concatenate([p[1] for p in parts]).astype(np.int64),
                  top1_score=np.concatenate([p[2] for p in parts]),
                  relevant_score=np.concatenate([p[3] for p in parts]),
                  near_ties=int(sum(p[4] for p in parts)))


def list_problems(items: np.ndarray, scores: np.ndarray | None, q0: int = 0) -> list[str]:
    """What makes precomputed lists unusable, naming ``ranking/item`` / ``ranking/score`` and rows.

    * an item named twice in one row: a duplicate would count as a second hit
      (the same relevant item "found" twice), so it is refused rather than
      silently dropped;
    * a NaN score on a listed item: it has no place in a tie group;
    * scores that rise along a list: the list is best first, so its scores
      must not increase (distances must be stored negated), else "equal
      scores form a tie group" would not describe a contiguous stretch.
    ``q0`` is the global row of ``items[0]``.
    """
    found = []
    valid = items >= 0
    if items.shape[1] > 1:
        ordered = np.sort(np.where(valid, items, -1 - np.arange(items.shape[1])), axis=1)
        dup = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if dup.size:
            row = ordered[dup[0]]
            item = int(row[1:][row[1:] == row[:-1]][0])
            where = np.flatnonzero(items[dup[0]] == item)
            found.append(f"ranking/item: rows {rows_text(dup + q0)} name a gallery item more than once "
                         f"(row {int(dup[0]) + q0}: item {item} at positions {', '.join(map(str, where))}); "
                         "each item may appear once per list")
    if scores is not None:
        # in the precision stored: float64 stays float64 (rounding to float32 would merge near scores into
        # a tie), float32 stays float32; anything else is widened to float64, exactly
        s = np.asarray(scores)
        s = s if s.dtype in (np.float32, np.float64) else s.astype(np.float64)
        nan = np.flatnonzero((np.isnan(s) & valid).any(axis=1))
        if nan.size:
            found.append(f"ranking/score: rows {rows_text(nan + q0)} hold NaN scores for listed items")
        else:
            # compare each listed item's score with the previous listed item's (pads skipped)
            filled = np.where(valid, s, np.array(np.inf, dtype=s.dtype))
            prev = np.maximum.accumulate(np.where(valid, -filled, -np.inf), axis=1)  # -(min so far)
            rises = valid[:, 1:] & (filled[:, 1:] > -prev[:, :-1])
            bad = np.flatnonzero(rises.any(axis=1))
            if bad.size:
                found.append(f"ranking/score: rows {rows_text(bad + q0)} rise along the list (ranking/item is "
                             "best first, so scores must not increase; store distances negated)")
    return found


def rank_by_lists(items: np.ndarray, scores: np.ndarray | None, truth: Truth,
                  gallery_junk: np.ndarray | None = None, ties: str = "pessimistic", q0: int = 0) -> Ranked:
    """Ranks from precomputed top-K lists (``ranking/item``): the given order, junk removed.

    Relevant items missing from a list have no rank; R still counts them.
    With ``scores`` (``ranking/score``, compared in the precision stored:
    float64 as float64, float32 as float32), listed items of
    equal score form a tie group and ``ties`` orders each group whatever order
    the list gives: ``pessimistic`` puts its non-relevant items first,
    ``optimistic`` its relevant ones; otherwise the list order stands. So

        rank(g) = #{kept items in earlier groups} + #{kept items of g's group placed before g} + 1

    and a list that scores everything alike gets the ranks of a list that
    put every relevant item last (pessimistic). Without scores ties cannot be
    seen and the given order stands. Bad lists (an item twice in a row, NaN or
    rising scores) raise InputError naming the rows (``q0`` = first global row).
    """
    if scores is not None:  # compared as stored, as in list_problems: never rounded to float32
        scores = np.asarray(scores)
        scores = scores if scores.dtype in (np.float32, np.float64) else scores.astype(np.float64)
    problems = list_problems(items, scores, q0)
    if problems:
        raise InputError(problems[0] + (f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""))
    n, k = items.shape
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    flat = items.reshape(-1).astype(np.int64)
    valid = flat >= 0
    pair = rows * (1 << 32) + np.where(valid, flat, 0)

    def member(indptr, members):
        keys = segment_ids(indptr) * (1 << 32) + members
        keys = np.sort(keys)
        pos = np.searchsorted(keys, pair)
        pos = np.minimum(pos, max(len(keys) - 1, 0))
        return (keys[pos] == pair) if len(keys) else np.zeros(pair.shape, bool)

    junk = member(truth.junk_indptr, truth.junk_items) & valid
    if gallery_junk is not None:
        junk |= valid & gallery_junk[np.where(valid, flat, 0)]
    if truth.allowed_indptr is not None:
        junk |= valid & ~member(truth.allowed_indptr, truth.allowed_items)
    kept = valid & ~junk
    rel = member(truth.rel_indptr, truth.rel_items) & kept
    # the order that counts: tie group (a new group wherever the kept score changes), then the
    # policy's side of the group, then the list position
    (idx,) = np.nonzero(kept)
    krow = rows[idx]
    if scores is not None:
        s = scores.reshape(-1)[idx]
        new_group = np.ones(idx.size, dtype=bool)
        new_group[1:] = (krow[1:] != krow[:-1]) | (s[1:] != s[:-1])
        group = np.cumsum(new_group)
        side = rel[idx] if ties == "pessimistic" else ~rel[idx]
        order = np.lexsort((idx, side, group))
    else:
        order = np.arange(idx.size)
    idx = idx[order]            # kept entries in ranking order, rows still ascending
    krow = rows[idx]
    start = np.searchsorted(krow, np.arange(n + 1))
    position = np.arange(idx.size, dtype=np.int64) - start[krow] + 1
    is_rel = rel[idx]
    ranks = position[is_rel]
    counts = np.bincount(krow[is_rel], minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    has = start[1:] > start[:-1]
    first = idx[start[:-1][has]]
    top1 = np.full(n, -1, dtype=np.int64)
    top1[has] = flat[first]
    top1_score = np.full(n, np.nan)
    relevant_score = np.full(n, np.nan)
    if scores is not None:
        flat_scores = scores.reshape(-1).astype(np.float64)  # widened: the values as stored
        top1_score[has] = flat_scores[first]
        rel_idx = idx[is_rel]
        has_rel = counts > 0
        relevant_score[has_rel] = flat_scores[rel_idx[indptr[:-1][has_rel]]]
    return Ranked(indptr, ranks.astype(np.int64), truth.n_relevant.astype(np.int64), top1, top1_score,
                  relevant_score)
