"""The CPU scan over embeddings: blocked scores -> ranks of the relevant items and rank 1 (README, How it works).

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

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from evalcore.core.canonical import (
    canonical_block,
    canonical_pairs,
    compact,
    first_identical,
    sq_dist_block,
    sq_dist_pairs,
)
from evalcore.core.kernels import NEAR, fold_settled, fold_tile
from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.scan.base import TILE_COLS, TILE_ROWS, Gallery, Ranked, Span, dense_tiles_of, rank, whole_rows
from evalcore.core.scan.counts import CountState, finish_states, merge_states, tile_mask
from evalcore.errors import ArrayError, mention, rows_text

#: float32 unit roundoff
U32 = 2.0 ** -24
_NO_JUNK = np.zeros(0, dtype=bool)


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


# --------------------------------------------------------------------------- euclidean


#: under euclidean every row's norm must stay below this: (||q|| + ||g||)^2 < 2**126, so no estimate, squared
#: norm or distance leaves float32's range (the check names the rows beyond it)
EUCLIDEAN_NORM_LIMIT = 2.0 ** 62


def pair_scores(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray, similarity: str) -> np.ndarray:
    """Canonical scores of the pairs (a[ia[p]], b[ib[p]]), higher is better: the float32 nearest to the exact
    dot product (cosine, dot), or to -||a - b||^2 (euclidean: minus ``canonical.sq_dist_pairs``, exact)."""
    if similarity == "euclidean":
        return -sq_dist_pairs(a, b, ia, ib)
    return canonical_pairs(a, b, ia, ib)


def as_reported(scores: np.ndarray, similarity: str) -> np.ndarray:
    """Canonical scores as reported: euclidean's are squared distances again (lower is better), others as is."""
    return -scores + 0.0 if similarity == "euclidean" else scores


def check_euclidean_norms(name: str, first_row: int, norms: np.ndarray, index: np.ndarray | None = None) -> None:
    """Under euclidean: ArrayError naming the rows of ``name`` (rows ``first_row ..``, or ``index[i]`` for
    norm i) whose norm reaches ``EUCLIDEAN_NORM_LIMIT``."""
    if len(norms) and not float(np.max(norms)) < EUCLIDEAN_NORM_LIMIT:
        bad = np.flatnonzero(~(norms < EUCLIDEAN_NORM_LIMIT))
        bad = index[bad] if index is not None else bad + first_row
        raise ArrayError(name, f"rows {rows_text(bad)} have norms up to {float(np.max(norms)):.3g}: squared "
                         "distances of such rows leave float32's range under " + mention("--similarity")
                         + f" euclidean (norms must stay below 2**62 = {EUCLIDEAN_NORM_LIMIT:.3g}); scale the embeddings down",
                         rows=bad)


def euclidean_floor(dims: int, qmax: float | np.ndarray, gmax: float) -> float | np.ndarray:
    """The absolute part of a euclidean estimate's error bound, for a query tile of norms up to ``qmax`` against
    a gallery tile of norms up to ``gmax`` (``tile_scores``); per row where ``qmax`` is an array of norms.

    The estimate v = 2 (q . g) - ||g||^2 - ||q||^2 in float32: the product is within gamma_D ||q|| ||g|| of
    q . g (``score_error``, doubled: the relative part ``qerr``); the squared norms rounded to float32 add
    u ||q||^2 + u ||g||^2 (and their float64 sums far less), the two subtractions at most u (||q|| + ||g||)^2
    each, and the canonical score lies within u ||q - g||^2 <= u (||q|| + ||g||)^2 of the exact value: in all
    below 5 u (||q|| + ||g||)^2, bounded by 8 u, plus twice the underflow slack (``error_floor``).
    """
    r = qmax + gmax
    return 8 * U32 * r * r * (1 + 1e-6) + 2 * error_floor(dims) + 2.0 ** -146



# --------------------------------------------------------------------------- state


class _TileState(CountState):
    """One query tile: canonical thresholds, counts of beaten thresholds, and rank 1 (``CountState``),
    with what the fold of score estimates needs: the thresholds' tie boundaries, ``qerr`` (the per-row
    error factor, ``score_error`` * ||q||) and a running lower bound of the rank-1 score.
    """

    def __init__(self, truth: Truth, r0: int, r1: int, l0: int, thresholds: np.ndarray, ties: str,
                 qerr: np.ndarray, similarity: str = "cosine", qnorms: np.ndarray | None = None):
        super().__init__(truth, r0, r1, l0, thresholds, ties, np.float32)
        n = self.n
        self.similarity = similarity
        # euclidean: the largest query norm of the tile, for the absolute part of the error bound
        self.qmax = float(np.max(qnorms[r0:r1])) if qnorms is not None and r1 > r0 else 0.0
        # the boundaries of the ascending thresholds, for the fold (--ties average folds as pessimistic ties do,
        # against doubled thresholds: ``CountState._count_both_sides``)
        self.bounds = tie_boundaries(self.thr_sorted, "pessimistic" if self.pessimistic else "optimistic")
        self.qerr = np.ascontiguousarray(qerr[r0:r1], dtype=np.float64)
        self.low = np.full(n, -np.inf, dtype=np.float64)      # largest (score - error) seen: rank 1 is >= it
        # A negative is rank 1 only if its canonical score reaches the best relevant one (``CountState.finish``),
        # so the bound starts there: far fewer early pairs are emitted as rank-1 candidates to settle.
        ends = self.row_start[1:]
        judged = ends > self.row_start[:-1]
        self.low[judged] = self.rel_sorted[ends[judged] - 1]
        self.dense = False    # most pairs need canonical scores: compute them first (``update_canonical``)
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
        if self.similarity == "euclidean":
            floor = float(euclidean_floor(qtile.shape[1], self.qmax, gtile.max_norm))
        k, out_idx, out_flag = self._fold(sub, col0, colmask, self.qerr, gtile.norms, gtile.max_norm, floor)
        if k:
            width = sub.shape[1]
            rows, cols = np.divmod(out_idx[:k], width)
            flags = out_flag[:k]
            # many pairs (a constant or collapsed submission): identical gallery rows share one score
            rep = gtile.representatives()[cols] if k > width else cols
            canon = pair_scores(qtile, gtile.rows, rows + self.l0, rep, self.similarity)
            fold_settled(rows, cols + col0, flags, canon, self.pessimistic, self.thr_start, self.thr_sorted,
                         self.hist, self.best, self.best_idx)
            self.n_near += int(np.count_nonzero(flags & NEAR))
            self.dense = 2 * k > sub.size

    def update_canonical(self, col0: int, colmask: np.ndarray | None, qtile: np.ndarray, gtile: GalleryTile) -> None:
        """Fold one tile from canonical scores computed for every pair (error 0: the fold decides all)."""
        distinct, position, rows64, norms64 = gtile.distinct_rows()
        if self.similarity == "euclidean":
            sub = -sq_dist_block(qtile[self.l0:self.l1], gtile.rows[distinct], rows64)
        else:
            sub = canonical_block(qtile[self.l0:self.l1], gtile.rows[distinct], rows64, norms64)
        if position is not None:
            sub = sub[:, position]
        n_exact = sub.size
        zero = np.zeros(self.n)
        k, out_idx, out_flag = self._fold(sub, col0, colmask, zero, gtile.norms, 0.0, 0.0)
        if k:
            rows, cols = np.divmod(out_idx[:k], sub.shape[1])
            fold_settled(rows, cols + col0, out_flag[:k], sub[rows, cols], self.pessimistic, self.thr_start,
                         self.thr_sorted, self.hist, self.best, self.best_idx)
        self.n_near += n_exact

    def _fold(self, sub: np.ndarray, col0: int, colmask: np.ndarray | None, qerr: np.ndarray, gnorm: np.ndarray,
              gmax: float, floor: float) -> tuple[int, np.ndarray, np.ndarray]:
        """Mask the tile's relevant and junk pairs, then one ``fold_tile`` pass; (emitted, their places, flags)."""
        self.mask(sub, col0)
        out_idx, out_flag = self._out_idx, self._out_flag
        if out_idx is None or out_flag is None or len(out_idx) < sub.size:
            out_idx = self._out_idx = np.empty(sub.size, dtype=np.int64)
            out_flag = self._out_flag = np.empty(sub.size, dtype=np.uint8)
        k = fold_tile(sub, _NO_JUNK if colmask is None else colmask, qerr, gnorm, gmax, floor, self.low,
                      self.thr_start, self.bounds, self.hist, out_idx, out_flag)
        return k, out_idx, out_flag

    def merge(self, other: CountState) -> None:
        """Add the state of the same queries over another, disjoint part of the gallery."""
        super().merge(other)
        assert isinstance(other, _TileState)
        np.maximum(self.low, other.low, out=self.low)


def threshold_scores(query_normalized: np.ndarray, truth: Truth, gallery: Gallery,
                     pairs: np.ndarray | None = None, similarity: str = "cosine") -> np.ndarray:
    """Canonical scores of the relevant pairs (CSR order of ``truth``): the thresholds ranks are counted against.

    ``pairs`` (indices into the CSR lists) limits the work to some pairs, e.g.
    those whose gallery item lies in one shard.
    """
    dims = query_normalized.shape[1]
    pair_row = segment_ids(truth.rel_indptr)
    items = truth.rel_items
    if pairs is not None:
        pair_row, items = pair_row[pairs], items[pairs]
    whole = whole_rows(gallery)
    if whole is not None:  # the normalised gallery is in memory as one array: index it, copy nothing
        return pair_scores(query_normalized, whole, pair_row, items, similarity)
    union, inverse = np.unique(items, return_inverse=True)
    rows = gallery.rows(union) if union.size else np.empty((0, dims), np.float32)
    return pair_scores(query_normalized, rows, pair_row, inverse.reshape(-1), similarity)


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
               query_normalized: np.ndarray, similarity: str = "cosine") -> list[_TileState]:
    norms = row_norms(query_normalized)
    qerr = score_error(query_normalized.shape[1]) * norms
    if similarity == "euclidean":  # the estimate holds 2 q . g (``euclidean_floor``)
        check_euclidean_norms("query/emb", q0, norms)
        qerr = 2 * qerr
    return [_TileState(truth, a - q0, b - q0, a - (a // TILE_ROWS) * TILE_ROWS, thresholds, ties, qerr,
                       similarity, norms if similarity == "euclidean" else None)
            for a, b, _ in tiles]


class GalleryTile:
    """One gallery tile's normalised rows, with what the fold needs of them computed once for all query tiles:
    row norms for the error bound (a constant under cosine), and, only when asked, identical rows."""

    def __init__(self, rows: np.ndarray, similarity: str):
        self.rows = rows
        self.squares: np.ndarray | None = None  # euclidean: ||g||^2 rounded to float32, for the estimates
        if similarity == "cosine":
            self.norms, self.max_norm = np.full(len(rows), UNIT_NORM), UNIT_NORM
        else:
            self.norms = row_norms(rows)
            self.max_norm = float(self.norms.max()) if len(rows) else 0.0
            if similarity == "euclidean":  # rows past EUCLIDEAN_NORM_LIMIT are refused before these are used
                with np.errstate(over="ignore"):
                    self.squares = (self.norms * self.norms).astype(np.float32)
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


def tile_scores(qtile: np.ndarray, gtile: np.ndarray, out: np.ndarray, qsquares: np.ndarray | None = None,
                gsquares: np.ndarray | None = None) -> np.ndarray:
    """The estimates of a tile's scores: one float32 matrix product. Any summation order will do (another
    BLAS library or device gives other last bits): every decision is made on canonical scores.

    Euclidean (``qsquares`` and ``gsquares``, the rows' squared norms in float32): 2 q . g - ||g||^2 - ||q||^2,
    an estimate of -||q - g||^2 (its error bound: ``euclidean_floor``)."""
    np.matmul(qtile, gtile.T, out=out)
    if qsquares is not None and gsquares is not None:
        out *= np.float32(2)
        out -= gsquares[None, :]
        out -= qsquares[:, None]
    return out


def scan_gallery(tiles, states: list[_TileState], blocks, gallery_junk: np.ndarray | None,
                 similarity: str = "cosine", dense_tiles: set[int] | None = None) -> None:
    """Fold every tile of the given gallery blocks into the states (one BLAS thread).

    ``dense_tiles`` (the first columns of gallery tiles found dense, kept by the
    caller across chunks and threads) lets a state start dense on a tile where
    another state already found most pairs undecided, instead of paying the
    float32 estimate and the second pass to find out again. Only the cost
    depends on it: both paths give the same numbers.
    """
    buffers: dict = {}  # one score buffer per tile shape, reused: no fresh 4 MiB array per product
    floor = error_floor(tiles[0][2].shape[1]) if tiles else 0.0
    euclidean = similarity == "euclidean"
    qsquares = [(row_norms(qtile) ** 2).astype(np.float32) if euclidean else None for _, _, qtile in tiles]
    with threadpool_limits(limits=1, user_api="blas"):
        for g0, block in blocks:
            for c0 in range(0, len(block), TILE_COLS):
                col0 = g0 + c0
                rows = block[c0:c0 + TILE_COLS]  # the last tile is short, the same in every run
                gtile = GalleryTile(rows, similarity)
                if euclidean:
                    check_euclidean_norms("gallery/emb", col0, gtile.norms)
                colmask = tile_mask(col0, len(rows), gallery_junk)
                for (_, _, qtile), state, qsq in zip(tiles, states, qsquares):
                    if state.dense or (dense_tiles is not None and col0 in dense_tiles):
                        state.dense = True
                        state.update_canonical(col0, colmask, qtile, gtile)
                        continue
                    shape = (len(qtile), len(rows))
                    out = buffers.get(shape)
                    if out is None:
                        out = buffers[shape] = np.empty(shape, dtype=np.float32)
                    state.update(tile_scores(qtile, rows, out, qsq, gtile.squares), col0, colmask, qtile, gtile, floor)
                    if state.dense and dense_tiles is not None:
                        dense_tiles.add(col0)



# --------------------------------------------------------------------------- the backend


@dataclass
class EmbeddingQueries:
    """One chunk's queries as the embedding scan sees them: normalised float32 rows ``q0 ..``, and
    ``n_query`` (Q of the whole dataset, 0 if unknown) so the last query tile is as short as it always is."""

    normalized: np.ndarray
    q0: int
    n_query: int = 0
    similarity: str = "cosine"
    _tiles: list | None = field(default=None, repr=False)

    @property
    def tiles(self) -> list[tuple[int, int, np.ndarray]]:
        """The chunk's query tiles (``query_tiles``), made on first use."""
        if self._tiles is None:
            self._tiles = query_tiles(self.normalized, self.q0, self.n_query)
        return self._tiles


class EmbeddingScan:
    """The scan backend over embeddings on the CPU: float32 products on the tile grid find the candidates,
    canonical scores decide (module docstring). Its source is a ``Gallery`` of normalised rows."""

    name = "embeddings"
    splits_pairs = True

    def queries(self, query_normalized: np.ndarray, q0: int, n_query: int = 0,
                similarity: str = "cosine") -> EmbeddingQueries:
        return EmbeddingQueries(query_normalized, q0, n_query, similarity)

    def thresholds(self, queries: EmbeddingQueries, truth: Truth, source: Gallery,
                   pairs: np.ndarray | None = None) -> np.ndarray:
        return threshold_scores(queries.normalized, truth, source, pairs, queries.similarity)

    def new_states(self, queries: EmbeddingQueries, truth: Truth, thresholds: np.ndarray,
                   ties: str) -> list[_TileState]:
        return new_states(queries.tiles, queries.q0, truth, thresholds, ties, queries.normalized,
                          queries.similarity)

    def scan(self, queries: EmbeddingQueries, states: list[_TileState], source: Gallery, span: Span | None,
             gallery_junk: np.ndarray | None) -> None:
        blocks = source.blocks() if span is None else source.blocks(*span)
        scan_gallery(queries.tiles, states, blocks, gallery_junk, queries.similarity, dense_tiles_of(source))

    def merge(self, parts: list[list[_TileState]]) -> list[_TileState]:
        return merge_states(parts)

    def finish(self, states: list[_TileState], truth: Truth, ties: str) -> Ranked:
        ranked = finish_states(states, truth, ties)
        if any(state.similarity == "euclidean" for state in states):  # reported as squared distances
            ranked.top1_score = as_reported(ranked.top1_score, "euclidean")
            ranked.relevant_score = as_reported(ranked.relevant_score, "euclidean")
        return ranked


EMBEDDINGS = EmbeddingScan()


def rank_by_embeddings(query: np.ndarray, q0: int, truth: Truth, gallery: Gallery, *, n_query: int | None = None,
                       similarity: str = "cosine", ties: str = "pessimistic",
                       gallery_junk: np.ndarray | None = None, parts: int = 1, map_fn=map) -> Ranked:
    """Ranks of every relevant item for queries ``q0 .. q0+len(query)`` (global indices).

    ``gallery`` gives normalised float32 rows (``base.Gallery``; ``base.WholeGallery``
    where it may hold them all as one array). ``n_query`` (Q of the whole
    dataset) lets the last query tile be as short as it always is instead of
    padded; the last gallery tile likewise. Memory: the query chunk, one
    gallery block and one score tile.

    ``parts > 1`` scans that many column ranges of the gallery
    (``gallery.blocks(start, stop)``, ``start`` a multiple of TILE_COLS) through
    ``map_fn`` (a thread pool's ``map``: the product and the kernel release
    the GIL) and adds their states, as gallery shards do.
    """
    queries = EMBEDDINGS.queries(normalize_rows(query, similarity), q0, n_query or 0, similarity)
    return rank(EMBEDDINGS, queries, truth, gallery, ties=ties, gallery_junk=gallery_junk, threads=parts,
                map_fn=map_fn)
