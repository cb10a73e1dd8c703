"""Per-query counting states shared by the scan backends (README, How it works: "Ranks are counts").

A ``CountState`` holds one query tile's relevant thresholds, the count of
negatives beating each, and the rank-1 candidate; a backend's fold adds to
it, states over disjoint gallery columns add up (``merge_states``), and
``finish_states`` turns them into exact ranks. The values compared are those
of the backend: canonical float32 scores for embeddings, the given values
(widened to float64) for a given score matrix.
"""
from __future__ import annotations

import numpy as np

from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.scan.base import Ranked

NEG_INF = np.float32(-np.inf)


class CountState:
    """One query tile: thresholds, counts of beaten thresholds, and rank 1.

    The tile's queries are chunk rows ``r0 .. r1`` sitting at tile rows
    ``l0 .. l0 + (r1 - r0)``; their pairs are contiguous slices of the CSR lists.
    ``thresholds`` are the scores of the chunk's relevant pairs (CSR order),
    compared as ``dtype``.
    """

    def __init__(self, truth: Truth, r0: int, r1: int, l0: int, thresholds: np.ndarray, ties: str,
                 dtype: type[np.floating]):
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
        self.exact = np.asarray(thresholds[p0:p1], dtype=dtype)
        self.p0 = p0
        # thresholds ascending within each row; equal scores by gain, so the best-placed one (the last) has the
        # lowest gain under pessimistic ties and the highest under optimistic ones
        if truth.rel_gain is None:
            by_value = np.lexsort((self.exact, self.pair_row))
        else:
            gain = truth.gains[p0:p1]
            by_value = np.lexsort((-gain if self.pessimistic else gain, self.exact, self.pair_row))
        self.by_value = by_value
        self.thr_sorted = np.ascontiguousarray(self.exact[by_value])
        self.hist = np.zeros(p1 - p0, dtype=np.int64)
        self.best = np.full(n, -np.inf, dtype=dtype)          # rank-1 score among negatives
        self.best_idx = np.full(n, -1, dtype=np.int64)
        self.n_near = 0
        self.n = n

    def mask(self, sub: np.ndarray, col0: int) -> None:
        """Set the tile's relevant and per-query junk pairs to -inf (``sub``: this state's rows of the tile
        whose first column is gallery item ``col0``), so the fold passes over them."""
        width = sub.shape[1]
        col1 = col0 + width
        a, b = np.searchsorted(self.rel_cols_sorted, [col0, col1])
        if b > a:
            sel = self.rel_by_col[a:b]
            sub[self.pair_row[sel], self.pair_col[sel] - col0] = NEG_INF
        a, b = np.searchsorted(self.junk_col, [col0, col1])
        if b > a:
            sub[self.junk_row[a:b], self.junk_col[a:b] - col0] = NEG_INF

    def merge(self, other: CountState) -> None:
        """Add the state of the same queries over another, disjoint part of the gallery."""
        self.hist += other.hist
        self.n_near += other.n_near
        better = (other.best > self.best) | ((other.best == self.best) & (other.best_idx >= 0)
                                             & ((self.best_idx < 0) | (other.best_idx < self.best_idx)))
        self.best[better] = other.best[better]
        self.best_idx[better] = other.best_idx[better]

    def finish(self, ties: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
        """Exact ranks (CSR by row, ascending), rank-1 item and score, best relevant score, near ties, and the
        relevant pair (index into the chunk's CSR list) of each rank."""
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
        at = self.row_start[1:][seg] - 1 - (j - self.row_start[seg])
        ranks = rank_by_j[at] if total else rank_by_j
        pairs = self.p0 + self.by_value[at] if total else np.empty(0, np.int64)
        # best relevant: highest score, lowest index on ties (pairs are index-ascending)
        rel_best = np.full(n, -np.inf, dtype=self.exact.dtype)
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
        return ranks, top1, top1_score, rel_score, self.n_near, pairs


def tile_mask(col0: int, width: int, gallery_junk: np.ndarray | None) -> np.ndarray | None:
    """Columns of the tile at ``col0`` that take no part: the gallery/junk items."""
    if gallery_junk is None:
        return None
    junk = gallery_junk[col0:col0 + width]
    return junk if junk.any() else None


def merge_states(parts: list) -> list:
    """States of the same query tiles over disjoint gallery shards, added up.

    Counts add, each relevant score was seen in exactly one shard, and rank 1
    is the highest score, lowest index on ties.
    """
    merged = parts[0]
    for other in parts[1:]:
        for mine, theirs in zip(merged, other):
            mine.merge(theirs)
    return merged


def finish_states(states: list, truth: Truth, ties: str) -> Ranked:
    """Exact ranks from the scanned states, concatenated in query order."""
    parts = [state.finish(ties) for state in states]
    ranks = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    return Ranked(indptr=truth.rel_indptr - truth.rel_indptr[0], ranks=ranks.astype(np.int64),
                  n_relevant=truth.n_relevant.astype(np.int64),
                  top1=np.concatenate([p[1] for p in parts]).astype(np.int64),
                  top1_score=np.concatenate([p[2] for p in parts]),
                  relevant_score=np.concatenate([p[3] for p in parts]),
                  near_ties=int(sum(p[4] for p in parts)),
                  pairs=np.concatenate([p[5] for p in parts]).astype(np.int64)
                  if parts else np.empty(0, np.int64))
