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
from threadpoolctl import threadpool_limits

from evalcore.core.canonical import canonical_pairs
from evalcore.core.scan.base import TILE_COLS, TILE_ROWS, Span, column_spans
from evalcore.core.scan.embeddings import error_floor, row_norms, score_error

#: the id that pads a list that is not full yet: it loses every tie
NO_ID = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Neighbors:
    """Rows ``r0 ..``: ``ids`` (n, k) the k nearest columns best first and ``scores`` their canonical scores
    (float32); ``far_ids`` (n,) the farthest column and ``far_scores`` its score."""

    r0: int
    ids: np.ndarray
    scores: np.ndarray
    far_ids: np.ndarray
    far_scores: np.ndarray


@dataclass(frozen=True)
class RowBlock:
    """Rows to search for: normalised float32 rows, the first one's global index ``r0``, and ``k``."""

    rows: np.ndarray
    r0: int
    k: int


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


class TopKState:
    """One tile of rows: the current k best (ids, canonical scores) and the farthest column so far."""

    def __init__(self, rows: np.ndarray, k: int):
        n = len(rows)
        self.rows = rows
        self.k = k
        self.norms = row_norms(rows)
        self.ids = np.full((n, k), NO_ID, dtype=np.int64)
        self.scores = np.full((n, k), -np.inf, dtype=np.float32)
        self.far_ids = np.full(n, NO_ID, dtype=np.int64)
        self.far_scores = np.full(n, np.inf, dtype=np.float32)

    def update(self, est: np.ndarray, col0: int, cols: np.ndarray, col_norm: float) -> None:
        """Fold one tile: ``est`` the float32 estimates of these rows against columns ``col0 ..`` (``cols``,
        whose largest norm is ``col_norm``)."""
        n, width = est.shape
        dims = self.rows.shape[1]
        err = (score_error(dims) * self.norms * col_norm + error_floor(dims))[:, None]
        bar = self.scores[:, -1].astype(np.float64)[:, None] - err
        if width >= self.k:
            kth = np.partition(est, width - self.k, axis=1)[:, width - self.k].astype(np.float64)[:, None]
            bar = np.maximum(bar, kth - 2 * err)
        r, c = np.nonzero(est >= bar)
        if len(r):
            self._merge_near(r, c + col0, canonical_pairs(self.rows, cols, r, c))
        top = self.far_scores.astype(np.float64)[:, None] + err
        top = np.minimum(top, est.min(axis=1).astype(np.float64)[:, None] + 2 * err)
        r, c = np.nonzero(est <= top)
        if len(r):
            self._merge_far(r, c + col0, canonical_pairs(self.rows, cols, r, c))

    def _merge_near(self, r: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> None:
        """Keep each row's k best of its list and the new pairs: highest score, then lowest id."""
        n, k = self.ids.shape
        all_r = np.concatenate([np.repeat(np.arange(n), k), r])
        all_id = np.concatenate([self.ids.reshape(-1), ids])
        all_s = np.concatenate([self.scores.reshape(-1), scores])
        order = np.lexsort((all_id, -all_s.astype(np.float64), all_r))
        all_r, all_id, all_s = all_r[order], all_id[order], all_s[order]
        start = np.searchsorted(all_r, np.arange(n))
        pos = np.arange(len(all_r)) - start[all_r]
        keep = pos < k
        self.ids[all_r[keep], pos[keep]] = all_id[keep]
        self.scores[all_r[keep], pos[keep]] = all_s[keep]

    def _merge_far(self, r: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> None:
        """Keep each row's farthest column: lowest score, then lowest id."""
        all_r = np.concatenate([np.arange(len(self.far_ids)), r])
        all_id = np.concatenate([self.far_ids, ids])
        all_s = np.concatenate([self.far_scores, scores])
        order = np.lexsort((all_id, all_s.astype(np.float64), all_r))
        first = order[np.searchsorted(all_r[order], np.arange(len(self.far_ids)))]
        self.far_ids = all_id[first]
        self.far_scores = all_s[first]

    def merge(self, other: TopKState) -> None:
        """Add the state of the same rows over another, disjoint range of columns."""
        n, k = other.ids.shape
        self._merge_near(np.repeat(np.arange(n), k), other.ids.reshape(-1), other.scores.reshape(-1))
        self._merge_far(np.arange(n), other.far_ids, other.far_scores)


class NeighborSearch:
    """The search backend (``base.SearchBackend``): exact top-k and farthest column per row (module docstring).
    Its source is a ``base.Columns`` of normalised rows (an ``ArrayColumns``, or a gallery's blocks)."""

    name = "neighbors"

    def new_states(self, queries: RowBlock) -> list[TopKState]:
        return [TopKState(queries.rows[t0:t0 + TILE_ROWS], queries.k)
                for t0 in range(0, len(queries.rows), TILE_ROWS)]

    def scan(self, queries: RowBlock, states: list[TopKState], source, span: Span | None) -> None:
        blocks = source.blocks() if span is None else source.blocks(*span)
        with threadpool_limits(limits=1, user_api="blas"):
            for g0, block in blocks:
                for c0 in range(0, len(block), TILE_COLS):
                    cols = block[c0:c0 + TILE_COLS]
                    col_norm = float(row_norms(cols).max())
                    for state in states:
                        state.update(np.matmul(state.rows, cols.T), g0 + c0, cols, col_norm)

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
                         np.concatenate([s.scores for s in states]),
                         np.concatenate([s.far_ids for s in states]),
                         np.concatenate([s.far_scores for s in states]))


NEIGHBORS = NeighborSearch()


def search(rows: np.ndarray, r0: int, source, k: int, *, threads: int = 1, map_fn=map) -> Neighbors:
    """The k nearest columns of ``source`` (and the farthest) for normalised ``rows`` (global index ``r0 ..``);
    ``threads > 1`` splits the columns into that many ranges through ``map_fn`` and merges them."""
    queries = RowBlock(np.ascontiguousarray(rows, dtype=np.float32), r0, k)

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
