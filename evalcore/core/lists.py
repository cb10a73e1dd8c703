"""What the metrics read for a chunk of queries: the ranks of relevant items, binary and graded (README, Metrics).

A ranking backend gives each query's relevant ranks with the relevant pair
each belongs to (``Ranked.pairs``); ``rank_lists`` turns them, with the
chunk's ``Truth``, into a ``RankLists``: the cut at ``--depth``, the gains of
the ranked items (graded qrels), the binary lists at ``--rel-level`` (an item
is relevant when its grade >= L), the ideal gains nDCG divides by, and what
bpref counts (judged not-relevant items ranked above each relevant one).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.scan.base import Ranked


@dataclass(frozen=True)
class RankLists:
    """CSR lists by query. Binary (grade >= L): ``ranks[indptr[i]:indptr[i+1]]`` ascending, R = ``n_relevant``.
    Graded (grade >= 1): ``gain_ranks`` ascending with their ``gains``; ``ideal_gains`` every relevant item's
    gain, highest first. ``judged_before`` (per binary rank) and ``n_judged_nonrel`` (per query): the judged
    not-relevant items above it and in all (None where unknown). ``n_retrieved`` (per query): the items its
    ranking holds within --depth (trec_eval's num_ret; None for a scan of the whole gallery)."""

    indptr: np.ndarray
    ranks: np.ndarray
    n_relevant: np.ndarray
    gain_indptr: np.ndarray
    gain_ranks: np.ndarray
    gains: np.ndarray
    ideal_indptr: np.ndarray
    ideal_gains: np.ndarray
    judged_before: np.ndarray | None = None
    n_judged_nonrel: np.ndarray | None = None
    n_retrieved: np.ndarray | None = None
    #: (indptr, places): the places of each query's ranked judged not-relevant items (grade 0, or 1 <= grade < L),
    #: ascending, within --depth; None where the ranking cannot tell (a scan of the whole gallery)
    nonrel_ranks: tuple[np.ndarray, np.ndarray] | None = None
    #: every retrieved item is judged (labels judge the whole gallery): the not-relevant places are all the
    #: places that are not relevant ranks, and ``nonrel_ranks`` is left None rather than spelt out
    all_judged: bool = False
    #: the tie-averaged measures' lists: (indptr, first place, size, gain) of each ranked relevant item's
    #: (grade >= 1) tie group, groups starting within --depth; None where the ranking does not say (a scan
    #: under pessimistic or optimistic ties)
    tie_groups: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    #: per binary rank, the items in the pool but not judged (qrels -2) ranked above it (infAP); None: none known
    pool_before: np.ndarray | None = None
    #: --rel-level and --depth as the lists were cut: the tie-averaged measures (``core.metrics``, --ties
    #: average) read the binary gain of a tie group's item (grade >= rel_level) and count no place past depth
    rel_level: int = 1
    depth: int | None = None

    def has(self, need: str) -> bool:
        """Whether the lists say what a metric ``needs`` (``registry.Metric.needs``): ``n_retrieved``, or
        ``judged`` (which retrieved items are judged)."""
        if need == "judged":
            return self.n_retrieved is not None and (self.all_judged or self.nonrel_ranks is not None)
        return getattr(self, need) is not None


def indptr_of(rows: np.ndarray, n: int) -> np.ndarray:
    """The CSR row pointer of elements whose rows (ascending) are given."""
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=out[1:])
    return out


def positions(indptr: np.ndarray) -> np.ndarray:
    """i for every element: its 1-based position within its row."""
    seg = segment_ids(indptr)
    return np.arange(len(seg), dtype=np.int64) - indptr[seg] + 1


def binary_lists(indptr: np.ndarray, ranks: np.ndarray, n_relevant: np.ndarray,
                 n_retrieved: np.ndarray | None = None) -> RankLists:
    """Lists of binary relevance from relevant ranks alone: gain 1 each, every listed item judged
    (judged_before = r_i - i), the judged not-relevant pool unknown (taken as at least R); ``n_retrieved``
    the list lengths, if known (every place of a list that is not a relevant rank is judged not relevant); no
    ties visible (tie groups of one)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    r = np.asarray(n_relevant, dtype=np.int64)
    ideal_indptr = np.zeros(len(r) + 1, dtype=np.int64)
    np.cumsum(r, out=ideal_indptr[1:])
    return RankLists(indptr, ranks, r, indptr, ranks, np.ones(len(ranks), np.int64), ideal_indptr,
                     np.ones(int(ideal_indptr[-1]), np.int64), ranks - positions(indptr), None,
                     None if n_retrieved is None else np.asarray(n_retrieved, dtype=np.int64), all_judged=True,
                     tie_groups=(indptr, ranks, np.ones(len(ranks), np.int64), np.ones(len(ranks), np.int64)))


def rank_lists(ranked: Ranked, truth: Truth, rel_level: int = 1, depth: int | None = None,
               n_gallery: int | None = None) -> RankLists:
    """The metrics' lists of one chunk.

    depth N: items ranked below N are not retrieved (trec_eval -M; n_retrieved = min(N, the list's)). Graded
    lists: every ranked relevant item (grade >= 1) with gain = its grade.
    Binary lists: those with grade >= L; R = #{relevant items with grade >= L}.
    judged_before(i) = #{grade-0 judged items above i} + #{ranked items with
    1 <= grade < L above i}; n_judged_nonrel = #{grade 0} + #{1 <= grade < L}.
    Outside qrels every gallery item is judged: judged_before(i) = r_i - i and
    n_judged_nonrel = G - R - n_junk (``n_gallery`` G), and ``all_judged``. n_retrieved: the list's kept
    entries, or for a scan G - n_junk (within depth either way).
    """
    n = truth.n_queries
    gains_all = truth.gains
    pairs = ranked.pairs if ranked.pairs is not None else np.arange(len(ranked.ranks), dtype=np.int64)
    rows = segment_ids(ranked.indptr)
    ranks = np.asarray(ranked.ranks, dtype=np.int64)
    gains = gains_all[pairs] if len(pairs) else np.empty(0, np.int64)
    before = ranked.judged_before
    pool = ranked.pool_before
    n_nonrel = truth.n_judged_nonrel
    if before is None and truth.nonrel_indptr is None:  # labels judge every item: all above are judged
        before = ranks - positions(ranked.indptr)
        if n_gallery is not None:
            n_nonrel = np.maximum(n_gallery - truth.n_relevant - truth.n_junk, 0).astype(np.int64)
    ties = None
    if ranked.tie_groups is not None:
        start, size = (np.asarray(a, dtype=np.int64) for a in ranked.tie_groups)
        if depth is None:   # as the ranking gave them: no copy
            ties = (np.asarray(ranked.indptr, dtype=np.int64), start, size, gains)
        else:
            within = start <= depth
            ties = (indptr_of(rows[within], n), start[within], size[within], gains[within])
    n_retrieved = ranked.n_retrieved
    if n_retrieved is None and n_gallery is not None and truth.allowed_indptr is None:
        # a scan ranks every gallery item but the query's junk
        n_retrieved = np.maximum(n_gallery - truth.n_junk, 0).astype(np.int64)
    nonrel_found: tuple[np.ndarray, np.ndarray] | None = None   # (row, place) of each judged non-relevant item
    if ranked.nonrel_ranks is not None:
        nonrel_found = segment_ids(ranked.nonrel_ranks[0]), np.asarray(ranked.nonrel_ranks[1], dtype=np.int64)
    if depth is not None:
        n_retrieved = None if n_retrieved is None else np.minimum(n_retrieved, depth)
        if nonrel_found is not None:
            within = nonrel_found[1] <= depth
            nonrel_found = nonrel_found[0][within], nonrel_found[1][within]
        keep = ranks <= depth
        rows, ranks, gains = rows[keep], ranks[keep], gains[keep]
        before = None if before is None else before[keep]
        pool = None if pool is None else pool[keep]
    gain_indptr = indptr_of(rows, n)
    seg_all = segment_ids(truth.rel_indptr - truth.rel_indptr[0])
    ideal_order = np.lexsort((-gains_all, seg_all))
    ideal_gains = gains_all[ideal_order]
    ideal_indptr = truth.rel_indptr - truth.rel_indptr[0]
    binary = gains >= rel_level
    n_relevant = np.bincount(seg_all[gains_all >= rel_level], minlength=n).astype(np.int64)
    if n_nonrel is not None and rel_level > 1:
        n_nonrel = n_nonrel + np.bincount(seg_all[gains_all < rel_level], minlength=n).astype(np.int64)
    if before is not None and rel_level > 1:
        # ranked items below the level are judged not relevant: count those above each item in its row
        low = (~binary).astype(np.int64)
        seen = np.cumsum(low) - low
        before = before + seen - np.concatenate([[0], np.cumsum(low)])[gain_indptr[:-1]][rows]
    nonrel = None
    if nonrel_found is not None and (depth is None and rel_level <= 1) and ranked.nonrel_ranks is not None:
        nonrel = ranked.nonrel_ranks   # as the ranking gave them (the common case: no copy, no sort)
    elif nonrel_found is not None:
        # ranked items below the level are judged not relevant too: merged into each row's places
        all_rows = np.concatenate([nonrel_found[0], rows[~binary]])
        all_places = np.concatenate([nonrel_found[1], ranks[~binary]])
        order = np.lexsort((all_places, all_rows))
        nonrel = (indptr_of(all_rows[order], n), all_places[order])
    return RankLists(indptr_of(rows[binary], n), ranks[binary], n_relevant, gain_indptr, ranks, gains,
                     ideal_indptr, ideal_gains, None if before is None else before[binary], n_nonrel, n_retrieved,
                     nonrel, all_judged=truth.nonrel_indptr is None, tie_groups=ties,
                     pool_before=None if pool is None else pool[binary], rel_level=rel_level, depth=depth)
