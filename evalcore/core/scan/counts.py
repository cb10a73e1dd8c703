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
        #: --ties average counts both sides of every tie in the same scan (``_count_both_sides``)
        self.average = ties == "average"
        #: how the fold compares: a negative equal to a threshold beats it (``>=``), except under optimistic ties
        self.pessimistic = ties != "optimistic"
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
        #: the relevant scores ascending within each row, and where each row's fold thresholds start in
        #: ``thr_sorted``: the same arrays, except under --ties average (``_count_both_sides``)
        self.rel_sorted = self.thr_sorted
        self.thr_start = self.row_start
        if self.average:
            self._count_both_sides()
        self.hist = np.zeros(len(self.thr_sorted), dtype=np.int64)
        self.best = np.full(n, -np.inf, dtype=dtype)          # rank-1 score among negatives
        self.best_idx = np.full(n, -1, dtype=np.int64)
        self.n_near = 0
        self.n = n

    def _count_both_sides(self) -> None:
        """--ties average: fold against every relevant score t and against t+, the next value above it in the
        state's dtype, both compared ``>=``: #{v >= t+} = #{v > t}. So one scan counts, for each relevant
        item, the negatives at or above its score and those strictly above it, the pessimistic and the
        optimistic counts, whose difference is the negatives tied with it (README, Metrics: ties). Each
        row's 2m thresholds stay ascending (t -> t+ is increasing); ``thr_start`` doubles ``row_start``."""
        t = self.rel_sorted
        m = len(t)
        values = np.concatenate([t, np.nextafter(t, np.array(np.inf, dtype=t.dtype))])
        rows = np.concatenate([self.pair_row, self.pair_row])   # the sorted pairs keep their rows' order
        order = np.lexsort((values, rows))
        self.thr_sorted = np.ascontiguousarray(values[order])
        self.thr_start = 2 * self.row_start
        place = np.empty(2 * m, dtype=np.int64)
        place[order] = np.arange(2 * m, dtype=np.int64)
        # for the j-th sorted relevant score: its own threshold and its t+ in thr_sorted
        self.at_score, self.above_score = place[:m], place[m:]

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

    def finish(self, ties: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray,
                                         tuple[np.ndarray, np.ndarray] | None]:
        """Exact ranks (CSR by row, ascending), rank-1 item and score, best relevant score, near ties, the
        relevant pair (index into the chunk's CSR list) of each rank, and under --ties average each rank's
        tie group (first place, size; else None): the ranks are then the pessimistic ones."""
        if self.average:
            ranks, pairs, groups = self._tied_ranks()
        else:
            ranks, pairs = self._ranks()
            groups = None
        return (ranks, *self._top1(ties), self.n_near, pairs, groups)

    def _ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact ranks (CSR by row, ascending) and the relevant pair of each."""
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
        return ranks, pairs

    def _tied_ranks(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """--ties average: pessimistic ranks, the pair of each, and each rank's tie group (first place, size).

        For the k-th relevant item from the top (score t), p_k = k + #{negatives >= t} and o_k = k +
        #{negatives > t}. The relevant items of equal score k_a..k_b (a run of equal thresholds) and the
        p - o negatives of that score are one tie group: it holds the places o_{k_a} .. p_{k_b}, so it starts
        at o_{k_a} (its smallest o) and has k_b - k_a + 1 + p - o places.
        """
        n, m = self.n, len(self.rel_sorted)
        if not m:
            empty = np.empty(0, np.int64)
            return empty, empty, (empty, empty.copy())
        csum = np.cumsum(self.hist)
        entry_row = np.repeat(np.arange(n, dtype=np.int64), 2 * self.counts)
        suffix = csum[self.thr_start[1:][entry_row] - 1] - csum + self.hist   # negatives >= each threshold
        at_or_above, above = suffix[self.at_score], suffix[self.above_score]
        seg = np.repeat(np.arange(n, dtype=np.int64), self.counts)
        j = np.arange(m, dtype=np.int64)
        k = self.row_start[1:][seg] - j   # sorted position j (ascending scores) is relevant number k from the top
        # runs of equal scores within a row: ascending j, so k falls along a run, from k_b at its first j to k_a
        t = self.rel_sorted
        first = np.ones(m, dtype=bool)
        first[1:] = (seg[1:] != seg[:-1]) | (t[1:] != t[:-1])
        starts = np.flatnonzero(first)
        run = np.cumsum(first) - 1
        ends = np.append(starts[1:], m) - 1
        k_top, k_bottom = k[ends[run]], k[starts[run]]
        start = k_top + above
        size = k_bottom - k_top + 1 + at_or_above - above
        at = self.row_start[1:][seg] - 1 - (j - self.row_start[seg])
        return (k + at_or_above)[at], self.p0 + self.by_value[at], (start[at], size[at])

    def _top1(self, ties: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rank-1 item and score, best relevant score (--ties average: the item pessimistic ties put first)."""
        n = self.n
        total = len(self.exact)
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
        return top1, top1_score, rel_score


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
                  if parts else np.empty(0, np.int64),
                  tie_groups=None if not parts or parts[0][6] is None else
                  (np.concatenate([p[6][0] for p in parts]).astype(np.int64),
                   np.concatenate([p[6][1] for p in parts]).astype(np.int64)))
