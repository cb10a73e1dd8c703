"""Ranks of the relevant items and the rank-1 item: precomputed lists here, scans in ``core.scan``.

For each query the rank of its k-th best relevant item is

    r_k = k + #{ non-junk, non-relevant g : s(g) beats s_k }

("beats": ``>=`` under pessimistic ties, ``>`` under optimistic ones). The
scans that count this over the gallery are the backends of ``core.scan``
(``core.scan.embeddings``: the tile grid and canonical scores on the CPU;
``core.scan.scores``: a given score matrix). Precomputed top-K lists
(``ranking/item``) are ranked here by their given order (``rank_by_lists``), and
judged-only queries among their own (item, score) pairs (``rank_pairs``).

The scan's names are re-exported below for the modules and tests that
import them from here.
"""
from __future__ import annotations

import numpy as np

from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.scan.base import TILE_COLS, TILE_ROWS, Ranked, column_spans
from evalcore.core.scan.counts import NEG_INF, finish_states, merge_states, tile_mask
from evalcore.core.scan.embeddings import (
    F32_MAX,
    F32_TINY,
    U32,
    UNIT_NORM,
    GalleryTile,
    _TileState,
    dot_limit,
    dot_overflow_rows,
    error_floor,
    new_states,
    normalize_rows,
    query_tiles,
    rank_by_embeddings,
    row_norms,
    scan_gallery,
    score_error,
    threshold_scores,
    tie_boundaries,
    tile_scores,
)
from evalcore.errors import InputError, rows_text

__all__ = [
    "F32_MAX", "F32_TINY", "NEG_INF", "TILE_COLS", "TILE_ROWS", "U32", "UNIT_NORM", "GalleryTile", "Ranked",
    "_TileState", "column_spans", "dot_limit", "dot_overflow_rows", "error_floor", "finish_states", "list_problems",
    "merge_states", "new_states", "normalize_rows", "query_tiles", "rank_by_embeddings", "rank_by_lists",
    "row_norms", "scan_gallery", "score_error", "threshold_scores", "tie_boundaries", "tile_mask", "tile_scores",
]


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
        return member_at(indptr, members)[0]

    def member_at(indptr, members):
        """(is the pair in the CSR list, its index there); CSR lists are sorted by (row, item)."""
        keys = segment_ids(indptr) * (1 << 32) + members
        keys = np.sort(keys)
        pos = np.searchsorted(keys, pair)
        pos = np.minimum(pos, max(len(keys) - 1, 0))
        return ((keys[pos] == pair) if len(keys) else np.zeros(pair.shape, bool)), pos

    junk = member(truth.junk_indptr, truth.junk_items) & valid
    if gallery_junk is not None:
        junk |= valid & gallery_junk[np.where(valid, flat, 0)]
    if truth.allowed_indptr is not None:
        junk |= valid & ~member(truth.allowed_indptr, truth.allowed_items)
    kept = valid & ~junk
    rel, rel_pair = member_at(truth.rel_indptr, truth.rel_items)
    rel &= kept
    nonrel = None
    if truth.nonrel_indptr is not None:
        nonrel = member(truth.nonrel_indptr, truth.nonrel_items) & kept
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
        if truth.rel_gain is None:
            order = np.lexsort((idx, side, group))
        else:  # tied relevant items by gain: lowest first (pessimistic), highest first (optimistic)
            gain = np.where(rel[idx], truth.gains[np.minimum(rel_pair[idx], len(truth.rel_items) - 1)], 0)
            order = np.lexsort((idx, gain if ties == "pessimistic" else -gain, side, group))
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
    judged_before = None
    if nonrel is not None:  # judged not-relevant items above each relevant one, within its row
        seen = np.cumsum(nonrel[idx])
        before_row = np.concatenate([[0], seen])[start[:-1]]
        judged_before = (seen - nonrel[idx] - before_row[krow])[is_rel].astype(np.int64)
    return Ranked(indptr, ranks.astype(np.int64), truth.n_relevant.astype(np.int64), top1, top1_score,
                  relevant_score, pairs=rel_pair[idx[is_rel]].astype(np.int64), judged_before=judged_before)


# =========================================================================== judged-only: pairs


def rank_pairs(indptr: np.ndarray, items: np.ndarray, scores: np.ndarray, relevant: np.ndarray,
               ties: str, n_relevant: np.ndarray, truth: Truth | None = None) -> Ranked:
    """Ranks within each query's own list of (item, score) (CSR by ``indptr``).

    Order: score descending; among equal scores non-relevant first
    (pessimistic) or relevant first (optimistic), relevant ones by gain (lowest
    first, or highest first); then lowest index. rank(g) = 1 + position in that
    order; top1 = the first item. With ``truth`` (whose relevant items are
    among the pairs) the ranks carry their relevant pairs, and, every listed
    item being judged, the judged non-relevant ones above each: r_i - i.
    """
    n = len(indptr) - 1
    rows = segment_ids(indptr)
    tie = relevant if ties == "pessimistic" else ~relevant
    pair = None
    if truth is not None:
        pair = np.full(len(items), -1, dtype=np.int64)
        found = is_member(indptr, items, truth.rel_indptr - truth.rel_indptr[0], truth.rel_items)
        keys = segment_ids(truth.rel_indptr) * (1 << 32) + truth.rel_items
        pair[found] = np.searchsorted(keys, rows[found] * (1 << 32) + items[found])
    if pair is not None and truth is not None and truth.rel_gain is not None:
        gain = np.where(pair >= 0, truth.gains[np.maximum(pair, 0)], 0)
        order = np.lexsort((items, gain if ties == "pessimistic" else -gain, tie, -scores.astype(np.float64), rows))
    else:
        order = np.lexsort((items, tie, -scores.astype(np.float64), rows))
    position = np.arange(len(rows), dtype=np.int64) - indptr[rows] + 1
    rel_sorted = relevant[order]
    ranks = position[rel_sorted]
    rel_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[rel_sorted], minlength=n), out=rel_indptr[1:])
    has = np.diff(indptr) > 0
    top1 = np.full(n, -1, dtype=np.int64)
    top1_score = np.full(n, np.nan)
    first = order[indptr[:-1][has]]
    top1[has], top1_score[has] = items[first], scores[first].astype(np.float64)
    relevant_score = np.full(n, np.nan)
    has_rel = np.diff(rel_indptr) > 0
    rel_scores = scores[order][rel_sorted].astype(np.float64)   # best first within each query
    relevant_score[has_rel] = rel_scores[rel_indptr[:-1][has_rel]]
    pairs = judged_before = None
    if pair is not None:
        pairs = pair[order][rel_sorted]
        judged_before = ranks - (np.arange(len(ranks), dtype=np.int64) - rel_indptr[segment_ids(rel_indptr)] + 1)
    return Ranked(rel_indptr, ranks, np.asarray(n_relevant, dtype=np.int64), top1, top1_score, relevant_score,
                  pairs=pairs, judged_before=judged_before)


def is_member(indptr: np.ndarray, items: np.ndarray, of_indptr: np.ndarray, of_items: np.ndarray) -> np.ndarray:
    """For each pair (row, item) of the first CSR list: is it in the second one?"""
    keys = np.sort(segment_ids(of_indptr) * (1 << 32) + of_items)
    pairs = segment_ids(indptr) * (1 << 32) + items
    if not keys.size:
        return np.zeros(len(pairs), dtype=bool)
    pos = np.minimum(np.searchsorted(keys, pairs), keys.size - 1)
    return keys[pos] == pairs
