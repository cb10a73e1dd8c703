"""Blocked scores -> ranks of the relevant items and the rank-1 item (README, How it works).

No Q x G matrix and no sort of gallery scores. For each query the rank of its
k-th best relevant item is

    r_k = k + #{ non-junk, non-relevant g : s(g) beats s_k }

where "beats" is ``>=`` under pessimistic ties and ``>`` under optimistic ones.

Exactness. Every score is one float32 number computed once, inside a matrix
product of a fixed shape (``TILE_ROWS`` x ``TILE_COLS``; the dataset's last
query and gallery tiles are shorter, the same in every run) at a fixed place
(query row mod TILE_ROWS, gallery index mod TILE_COLS) with one BLAS thread.
OpenBLAS gives different last bits for the same dot product at different
positions or shapes, so this canonical grid is what makes results independent
of chunking and worker count. Relevant scores come out of the same tiles as
negative ones. To count negatives above a threshold before that threshold's
own tile has been computed, each relevant score is first estimated (``t~``,
another float32 dot product) inside a rigorous band: any float32 summation
is within gamma_D * ||q|| ||g|| of the exact dot product, so the tile's score
lies within twice that of t~. A negative outside every band is counted at
once (``kernels.fold_tile``); the few inside a band are kept and compared with
the exact thresholds at the end. Shards of the gallery add their counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from threadpoolctl import threadpool_limits

from evalcore.core.kernels import fold_tile, pair_dots
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
    near_ties: int = 0        # negatives resolved against exact thresholds


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


def float32_order_keys(values: np.ndarray) -> np.ndarray:
    """uint32 keys whose unsigned order is the float order (-0.0 folded into +0.0)."""
    bits = (np.asarray(values, dtype=np.float32) + np.float32(0.0)).view(np.uint32)
    negative = (bits >> 31).astype(bool)
    return np.where(negative, ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)


def _key_values(keys: np.ndarray) -> np.ndarray:
    """The float32 values back from ``row_keys`` keys (inverse of float32_order_keys)."""
    bits = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    positive = (bits >> 31).astype(bool)
    return np.where(positive, bits & np.uint32(0x7FFFFFFF), ~bits).astype(np.uint32).view(np.float32)


def row_keys(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """uint64 keys ordered by (row, float value): one searchsorted serves many rows."""
    return (np.asarray(rows, dtype=np.uint64) << np.uint64(32)) | float32_order_keys(values).astype(np.uint64)


def round_down32(x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float32)
    return np.where(y.astype(np.float64) > x, np.nextafter(y, np.float32(-np.inf)), y)


def round_up32(x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float32)
    return np.where(y.astype(np.float64) < x, np.nextafter(y, np.float32(np.inf)), y)


def score_bounds(q: np.ndarray, g: np.ndarray, pair_q: np.ndarray, pair_g: np.ndarray,
                 dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 bounds [lo, hi] that surely hold the float32 tile score of each pair.

    ``q[pair_q[i]]`` and ``g[pair_g[i]]`` are pair i's normalised float32 rows.
    Any float32 summation order lies within gamma_D * sum|q_k g_k| <=
    gamma_D * ||q|| ||g|| of the exact dot product (Cauchy-Schwarz), so the
    tile's score and this float32 estimate are within twice that of each
    other; a few units of roundoff cover the norms and a last-bit difference
    in normalisation.
    """
    approx = np.empty(len(pair_q), dtype=np.float32)
    gn = np.empty(len(pair_q), dtype=np.float64)
    pair_dots(np.ascontiguousarray(q, dtype=np.float32), np.ascontiguousarray(g, dtype=np.float32),
              np.asarray(pair_q, dtype=np.int64), np.asarray(pair_g, dtype=np.int64), approx, gn)
    qn = np.sqrt(np.einsum("ij,ij->i", q, q, dtype=np.float64))
    gamma = dims * U32 / (1 - dims * U32)
    delta = (2 * gamma + 16 * U32) * qn[pair_q] * gn * (1 + 1e-6) + 1e-30
    approx = approx.astype(np.float64)
    return round_down32(approx - delta), round_up32(approx + delta)


# --------------------------------------------------------------------------- state


class _TileState:
    """One query tile: thresholds, running rank-1 and the histogram of beaten thresholds.

    The tile's queries are chunk rows ``r0 .. r1`` sitting at tile rows
    ``l0 .. l0 + (r1 - r0)``; their pairs are contiguous slices of the CSR lists.
    """

    def __init__(self, truth: Truth, r0: int, r1: int, l0: int, lo: np.ndarray, hi: np.ndarray):
        n = r1 - r0
        self.l0, self.l1 = l0, l0 + n
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
        # band bounds sorted within each row (sorting (row, value) keys sorts both at once)
        self.lo_vals = _key_values(np.sort(row_keys(self.pair_row, lo[p0:p1])))
        self.hi_vals = _key_values(np.sort(row_keys(self.pair_row, hi[p0:p1])))
        self.lo_min = np.full(n, np.inf, dtype=np.float32)
        has = self.counts > 0
        self.lo_min[has] = self.lo_vals[self.row_start[:-1][has]]
        self.exact = np.full(p1 - p0, np.nan, dtype=np.float32)
        self.hist = np.zeros(p1 - p0, dtype=np.int64)
        self.near: list[tuple[np.ndarray, np.ndarray]] = []
        self.best = np.full(n, -np.inf, dtype=np.float32)
        self.best_idx = np.full(n, -1, dtype=np.int64)
        self.n = n
        # scratch for the kernel, reused across tiles
        self._near_row: np.ndarray | None = None
        self._near_val: np.ndarray | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_near_row"] = state["_near_val"] = None  # scratch does not travel between workers
        return state

    def update(self, scores: np.ndarray, col0: int, colmask: np.ndarray | None) -> None:
        """Fold one tile of scores (TILE_ROWS x TILE_COLS, gallery from ``col0``) into the state."""
        sub = scores[self.l0:self.l1]
        col1 = col0 + sub.shape[1]
        a, b = np.searchsorted(self.rel_cols_sorted, [col0, col1])
        if b > a:
            sel = self.rel_by_col[a:b]
            r, c = self.pair_row[sel], self.pair_col[sel] - col0
            self.exact[sel] = sub[r, c]
            sub[r, c] = NEG_INF
        a, b = np.searchsorted(self.junk_col, [col0, col1])
        if b > a:
            sub[self.junk_row[a:b], self.junk_col[a:b] - col0] = NEG_INF
        near_row, near_val = self._near_row, self._near_val
        if near_row is None or near_val is None or len(near_row) < sub.size:
            near_row = self._near_row = np.empty(sub.size, dtype=np.int64)
            near_val = self._near_val = np.empty(sub.size, dtype=np.float32)
        k = fold_tile(sub, col0, _NO_JUNK if colmask is None else colmask, self.best, self.best_idx, self.lo_min,
                      self.row_start, self.lo_vals, self.hi_vals, self.hist, near_row, near_val)
        if k:
            keys = row_keys(near_row[:k], near_val[:k])
            if k > 4096:  # many exact ties (a constant submission): keep each distinct value once
                keys, mult = np.unique(keys, return_counts=True)
            else:
                mult = np.ones(k, dtype=np.int64)
            self.near.append((keys, mult))

    def merge(self, other: _TileState) -> None:
        """Add the state of the same queries over another, disjoint part of the gallery."""
        seen = ~np.isnan(other.exact)
        self.exact[seen] = other.exact[seen]
        self.hist += other.hist
        self.near.extend(other.near)
        better = (other.best > self.best) | ((other.best == self.best) & (other.best_idx >= 0)
                                             & ((self.best_idx < 0) | (other.best_idx < self.best_idx)))
        self.best[better] = other.best[better]
        self.best_idx[better] = other.best_idx[better]

    def finish(self, ties: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Exact ranks (CSR by row, ascending), rank-1 item and score, best relevant score."""
        n = self.n
        exact_keys = np.sort(row_keys(self.pair_row, self.exact))
        n_near = 0
        if self.near:
            keys = np.concatenate([k for k, _ in self.near])
            mult = np.concatenate([m for _, m in self.near])
            n_near = int(mult.sum())
            row = (keys >> np.uint64(32)).astype(np.int64)
            side: Literal["left", "right"] = "right" if ties == "pessimistic" else "left"
            beaten = np.searchsorted(exact_keys, keys, side=side) - self.row_start[row]
            hit = beaten > 0
            self.hist += np.bincount(self.row_start[row[hit]] + beaten[hit] - 1, weights=mult[hit],
                                     minlength=len(self.hist)).astype(np.int64)
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
        # best relevant: highest exact score, lowest index on ties (pairs are index-ascending)
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
        return ranks, top1, top1_score, rel_score, n_near


def threshold_bounds(query_normalized: np.ndarray, truth: Truth, gallery,
                     pairs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Float32 bands [lo, hi] around relevant pairs' scores (CSR order of ``truth``).

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
        return score_bounds(query_normalized, whole, pair_row, items, dims)
    union, inverse = np.unique(items, return_inverse=True)
    rows = gallery.rows(union) if union.size else np.empty((0, dims), np.float32)
    return score_bounds(query_normalized, rows, pair_row, inverse, dims)


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


def new_states(tiles, q0: int, truth: Truth, lo: np.ndarray, hi: np.ndarray) -> list[_TileState]:
    return [_TileState(truth, a - q0, b - q0, a - (a // TILE_ROWS) * TILE_ROWS, lo, hi) for a, b, _ in tiles]


def scan_gallery(tiles, states: list[_TileState], blocks, gallery_junk: np.ndarray | None) -> None:
    """Fold every tile of the given gallery blocks into the states (one BLAS thread)."""
    buffers: dict = {}  # one score buffer per tile shape, reused: no fresh 4 MiB array per product
    with threadpool_limits(limits=1, user_api="blas"):
        for g0, block in blocks:
            for c0 in range(0, len(block), TILE_COLS):
                col0 = g0 + c0
                gtile = block[c0:c0 + TILE_COLS]  # the last tile is short, the same in every run
                colmask = tile_mask(col0, len(gtile), gallery_junk)
                for (_, _, qtile), state in zip(tiles, states):
                    shape = (len(qtile), len(gtile))
                    out = buffers.get(shape)
                    if out is None:
                        out = buffers[shape] = np.empty(shape, dtype=np.float32)
                    state.update(np.matmul(qtile, gtile.T, out=out), col0, colmask)


def merge_states(parts: list[list[_TileState]]) -> list[_TileState]:
    """States of the same query tiles over disjoint gallery shards, added up.

    Counts add, each relevant score was seen in exactly one shard, near
    negatives are pooled, and the best negative is the highest score, lowest
    index on ties.
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
    the GIL) and adds their states, as gallery shards do: the same tiles, so
    the same numbers.
    """
    qn = normalize_rows(query, similarity)
    lo, hi = threshold_bounds(qn, truth, gallery)
    tiles = query_tiles(qn, q0, n_query or 0)

    def scan(span: tuple[int, int] | None) -> list[_TileState]:
        states = new_states(tiles, q0, truth, lo, hi)
        scan_gallery(tiles, states, gallery.blocks() if span is None else gallery.blocks(*span), gallery_junk)
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
