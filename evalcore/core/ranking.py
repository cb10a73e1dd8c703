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

from evalcore.core.list_kernels import list_row_problems, rank_rows
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
from evalcore.errors import ArrayError, InputError, first_problem, mention, rows_text
from evalcore.types import LIST_ITEMS, LIST_SCORES

__all__ = [
    "F32_MAX", "F32_TINY", "NEG_INF", "TILE_COLS", "TILE_ROWS", "U32", "UNIT_NORM", "GalleryTile", "Ranked",
    "_TileState", "column_spans", "dot_limit", "dot_overflow_rows", "error_floor", "finish_states",
    "item_range_problems", "list_problems",
    "merge_states", "new_states", "normalize_rows", "query_tiles", "rank_by_embeddings", "rank_by_lists",
    "row_norms", "scan_gallery", "score_error", "threshold_scores", "tie_boundaries", "tile_mask", "tile_scores",
]


def list_problems(items: np.ndarray, scores: np.ndarray | None, q0: int = 0) -> list[InputError]:
    """What makes precomputed lists unusable, naming ``ranking/item`` / ``ranking/score`` and rows.

    * an item named twice in one row: a duplicate would count as a second hit
      (the same relevant item "found" twice), so it is refused rather than
      silently dropped;
    * a NaN score on a listed item: it has no place in a tie group;
    * scores that rise along a list: the list is best first, so its scores
      must not increase (distances must be stored negated), else "equal
      scores form a tie group" would not describe a contiguous stretch.
    ``q0`` is the global row of ``items[0]``. One compiled pass a row
    (``list_kernels.list_row_problems``); the messages are built here.
    """
    found: list[InputError] = []
    items = np.ascontiguousarray(items)
    if items.dtype.kind not in "iu":
        items = items.astype(np.int64)
    n, k = items.shape
    s = None
    if scores is not None:
        # in the precision stored: float64 stays float64 (rounding to float32 would merge near scores into
        # a tie), float32 stays float32; anything else is widened to float64, exactly
        s = np.asarray(scores)
        s = np.ascontiguousarray(s if s.dtype in (np.float32, np.float64) else s.astype(np.float64))
    dup, nan, rises = (np.zeros(n, dtype=bool) for _ in range(3))
    if n and k:
        top = int(items.max())
        use_stamp = top < max(1 << 22, 8 * items.size)  # one slot per item, else a sort per row
        stamp = np.zeros(top + 1 if use_stamp else 0, dtype=np.int32)   # row + 1 (a chunk's rows fit)
        list_row_problems(items, s if s is not None else np.zeros((0, 0)), s is not None, stamp, use_stamp,
                          dup, nan, rises)
    dup_rows = np.flatnonzero(dup)
    if dup_rows.size and k > 1:
        row = items[dup_rows[0]].astype(np.int64)
        ordered = np.sort(np.where(row >= 0, row, -1 - np.arange(k)))
        item = int(ordered[1:][ordered[1:] == ordered[:-1]][0])
        where = np.flatnonzero(row == item)
        found.append(ArrayError(LIST_ITEMS, f"rows {rows_text(dup_rows + q0)} name a gallery item more than "
                                f"once (row {int(dup_rows[0]) + q0}: item {item} at positions "
                                f"{', '.join(map(str, where))}); each item may appear once per list",
                                rows=dup_rows + q0))
    if s is not None:
        nan_rows = np.flatnonzero(nan)
        if nan_rows.size:
            found.append(ArrayError(LIST_SCORES, f"rows {rows_text(nan_rows + q0)} hold NaN scores for listed "
                                    "items", rows=nan_rows + q0))
        else:
            bad = np.flatnonzero(rises)
            if bad.size:
                found.append(ArrayError(LIST_SCORES, f"rows {rows_text(bad + q0)} rise along the list "
                                        "(" + mention(LIST_ITEMS)
                                        + " is best first, so scores must not increase; store distances "
                                        "negated)", rows=bad + q0))
    return found


def item_range_problems(items: np.ndarray, n_gallery: int, q0: int = 0) -> list[InputError]:
    """Rows of ``ranking/item`` holding an index outside [0, G) other than the pad -1 (``q0``: global row of
    ``items[0]``)."""
    if not items.size or (int(items.min()) >= -1 and int(items.max()) < n_gallery):
        return []
    bad = np.nonzero(((items < -1) | (items >= n_gallery)).any(axis=1))[0]
    return [ArrayError(LIST_ITEMS, f"rows {rows_text(bad + q0)} hold gallery indices outside [0, {n_gallery}) "
            "(use -1 only to pad)", rows=bad + q0)]


def _csr_or_empty(indptr: np.ndarray | None, members: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A CSR list as contiguous int64 arrays; absent: every row empty."""
    if indptr is None or members is None:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return (np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(members, dtype=np.int64))


def rank_by_lists(items: np.ndarray, scores: np.ndarray | None, truth: Truth,
                  gallery_junk: np.ndarray | None = None, ties: str = "pessimistic", q0: int = 0,
                  n_gallery: int | None = None) -> Ranked:
    """Ranks from precomputed top-K lists (``ranking/item``): the given order, junk removed.

    Relevant items missing from a list have no rank; R still counts them.
    With ``scores`` (``ranking/score``, compared in the precision stored:
    float64 as float64, float32 as float32), listed items of
    equal score form a tie group and ``ties`` orders each group whatever order
    the list gives: ``pessimistic`` puts its non-relevant items first,
    ``optimistic`` its relevant ones (relevant items of a group by gain:
    lowest first, pessimistic; highest first, optimistic); otherwise the list
    order stands. So

        rank(g) = #{kept items in earlier groups} + #{kept items of g's group placed before g} + 1

    and a list that scores everything alike gets the ranks of a list that
    put every relevant item last (pessimistic). ``average`` ranks as
    ``pessimistic`` does; the metrics then share each group's gains over its
    places (``Ranked.tie_groups``, kept under every policy). Without scores
    ties cannot be seen and the given order stands (tie groups of one item),
    whatever the policy. Bad lists (an index outside [0, ``n_gallery``)
    other than the pad -1, an item twice in a row, NaN or rising scores) raise
    InputError naming the rows (``q0`` = first global row). Each row is walked
    once (``list_kernels.rank_rows``).
    """
    if scores is not None:  # compared as stored, as in list_problems: never rounded to float32
        scores = np.asarray(scores)
        scores = np.ascontiguousarray(scores if scores.dtype in (np.float32, np.float64)
                                      else scores.astype(np.float64))
    items = np.ascontiguousarray(items)
    if items.dtype.kind not in "iu":
        items = items.astype(np.int64)
    if n_gallery is None and gallery_junk is not None:
        n_gallery = len(gallery_junk)
    problems = item_range_problems(items, n_gallery, q0) if n_gallery is not None else []
    problems += list_problems(items, scores, q0)
    if problems:
        raise first_problem(problems)
    n, k = items.shape
    junk_indptr, junk_items = _csr_or_empty(truth.junk_indptr, truth.junk_items, n)
    allowed_indptr, allowed_items = _csr_or_empty(truth.allowed_indptr, truth.allowed_items, n)
    rel_indptr, rel_items = _csr_or_empty(truth.rel_indptr, truth.rel_items, n)
    nonrel_indptr, nonrel_items = _csr_or_empty(truth.nonrel_indptr, truth.nonrel_items, n)
    gains = truth.gains if truth.rel_gain is not None else np.zeros(0, dtype=np.int64)
    # each row's relevant entries are written from out_start[r]: at most min(R, K) of them
    room = np.minimum(np.diff(rel_indptr), k)
    out_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(room, out=out_start[1:])
    counts = np.zeros(n, dtype=np.int64)
    ranks, pairs, before, tie_start, tie_size = (np.zeros(int(out_start[-1]), dtype=np.int64) for _ in range(5))
    first_pos, first_rel_pos = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    kept = np.zeros(n, dtype=np.int64)
    # each row's judged non-relevant places are written from nonrel_start[r]: at most min(#judged, K) of them
    nonrel_room = np.minimum(np.diff(nonrel_indptr), k)
    nonrel_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nonrel_room, out=nonrel_start[1:])
    nonrel_counts = np.zeros(n, dtype=np.int64)
    nonrel_ranks = np.zeros(int(nonrel_start[-1]), dtype=np.int64)
    pool_indptr, pool_items = _csr_or_empty(truth.pool_indptr, truth.pool_items, n)
    pool_before = np.zeros(int(out_start[-1]) if truth.pool_indptr is not None else 0, dtype=np.int64)
    rank_rows(items, scores if scores is not None else np.zeros((0, 0)), scores is not None, ties != "optimistic",
              junk_indptr, junk_items,
              gallery_junk if gallery_junk is not None else np.zeros(0, dtype=bool), gallery_junk is not None,
              allowed_indptr, allowed_items, truth.allowed_indptr is not None,
              rel_indptr, rel_items, np.ascontiguousarray(gains, dtype=np.int64), truth.rel_gain is not None,
              nonrel_indptr, nonrel_items, truth.nonrel_indptr is not None,
              out_start, counts, ranks, pairs, before, first_pos, first_rel_pos, kept,
              nonrel_start, nonrel_counts, nonrel_ranks, tie_start, tie_size,
              pool_indptr, pool_items, truth.pool_indptr is not None, pool_before)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    if indptr[-1] != out_start[-1]:  # keep only the written part of each row's room
        written = np.arange(out_start[-1]) - np.repeat(out_start[:-1], room) < np.repeat(counts, room)
        ranks, pairs, before = ranks[written], pairs[written], before[written]
        tie_start, tie_size = tie_start[written], tie_size[written]
        if truth.pool_indptr is not None:
            pool_before = pool_before[written]
    rows = np.arange(n)
    has, has_rel = first_pos >= 0, first_rel_pos >= 0
    top1 = np.full(n, -1, dtype=np.int64)
    top1[has] = items[rows[has], first_pos[has]]
    top1_score = np.full(n, np.nan)
    relevant_score = np.full(n, np.nan)
    if scores is not None:  # widened: the values as stored
        top1_score[has] = scores[rows[has], first_pos[has]]
        relevant_score[has_rel] = scores[rows[has_rel], first_rel_pos[has_rel]]
    judged_before = before if truth.nonrel_indptr is not None else None
    nonrel = None
    if truth.nonrel_indptr is not None:  # the judged non-relevant places, CSR (the written part of each room)
        nonrel_indptr_out = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(nonrel_counts, out=nonrel_indptr_out[1:])
        if nonrel_indptr_out[-1] != nonrel_start[-1]:
            written = np.arange(nonrel_start[-1]) - np.repeat(nonrel_start[:-1], nonrel_room) < \
                np.repeat(nonrel_counts, nonrel_room)
            nonrel_ranks = nonrel_ranks[written]
        nonrel = (nonrel_indptr_out, nonrel_ranks)
    return Ranked(indptr, ranks, truth.n_relevant.astype(np.int64), top1, top1_score,
                  relevant_score, pairs=pairs, judged_before=judged_before, n_retrieved=kept, nonrel_ranks=nonrel,
                  tie_groups=(tie_start, tie_size), pool_before=pool_before if truth.pool_indptr is not None else None)


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
    ``average`` orders as ``pessimistic`` and also gives each relevant rank's
    tie group (the pairs of its query with its score: first place, size).
    """
    n = len(indptr) - 1
    rows = segment_ids(indptr)
    pessimistic = ties != "optimistic"
    tie = relevant if pessimistic else ~relevant
    pair = None
    if truth is not None:
        pair = np.full(len(items), -1, dtype=np.int64)
        found = is_member(indptr, items, truth.rel_indptr - truth.rel_indptr[0], truth.rel_items)
        keys = segment_ids(truth.rel_indptr) * (1 << 32) + truth.rel_items
        pair[found] = np.searchsorted(keys, rows[found] * (1 << 32) + items[found])
    if pair is not None and truth is not None and truth.rel_gain is not None:
        gain = np.where(pair >= 0, truth.gains[np.maximum(pair, 0)], 0)
        order = np.lexsort((items, gain if pessimistic else -gain, tie, -scores.astype(np.float64), rows))
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
    pairs = judged_before = nonrel = None
    if pair is not None:
        pairs = pair[order][rel_sorted]
        judged_before = ranks - (np.arange(len(ranks), dtype=np.int64) - rel_indptr[segment_ids(rel_indptr)] + 1)
        # every listed pair is judged: the places of the others are the judged non-relevant ones
        nonrel_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows[~rel_sorted], minlength=n), out=nonrel_indptr[1:])
        nonrel = (nonrel_indptr, position[~rel_sorted])
    groups = None
    if ties == "average":   # runs of equal scores within a query, in the sorted order: one tie group each
        ordered = scores[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (ordered[1:] != ordered[:-1])
        run = np.cumsum(first) - 1
        starts = np.flatnonzero(first)
        size = np.diff(np.append(starts, len(order)))
        groups = (position[starts][run][rel_sorted], size[run][rel_sorted])
    return Ranked(rel_indptr, ranks, np.asarray(n_relevant, dtype=np.int64), top1, top1_score, relevant_score,
                  pairs=pairs, judged_before=judged_before, n_retrieved=np.diff(indptr).astype(np.int64),
                  nonrel_ranks=nonrel, tie_groups=groups)


def is_member(indptr: np.ndarray, items: np.ndarray, of_indptr: np.ndarray, of_items: np.ndarray) -> np.ndarray:
    """For each pair (row, item) of the first CSR list: is it in the second one?"""
    keys = np.sort(segment_ids(of_indptr) * (1 << 32) + of_items)
    pairs = segment_ids(indptr) * (1 << 32) + items
    if not keys.size:
        return np.zeros(len(pairs), dtype=bool)
    pos = np.minimum(np.searchsorted(keys, pairs), keys.size - 1)
    return keys[pos] == pairs
