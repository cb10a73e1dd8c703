"""Ranking rows from results listed one per record (a TREC run's lines): placed, then each row best first.

Records carry a query code, a document code and a score; maps from codes
give each record its ranking row (-1: left out) and its item. A row lists
its records by score descending, equal scores in record order, or (``by_item``,
trec_eval's order) by item descending; records already listed so, as runs
usually are, are only placed, and any other row is sorted on its own.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def row_counts(qcode, row_of_query, n_rows):
    """Records of each ranking row (``row_of_query[qcode[r]]``; -1 counts nowhere)."""
    counts = np.zeros(n_rows, dtype=np.int64)
    for r in range(qcode.size):
        row = row_of_query[qcode[r]]
        if row >= 0:
            counts[row] += 1
    return counts


@njit(cache=True, nogil=True)
def used_codes(qcode, dcode, row_of_query, n_docs):
    """Whether each document code is listed by a record whose query has a ranking row."""
    used = np.zeros(n_docs, dtype=np.bool_)
    for r in range(qcode.size):
        if row_of_query[qcode[r]] >= 0:
            used[dcode[r]] = True
    return used


@njit(cache=True, nogil=True)
def _sort_row(items, scores, n, by_item):
    """The first ``n`` entries of one row reordered best first (stable merge sorts, so ties keep their order)."""
    it, sc = items[:n].copy(), scores[:n].copy()
    if by_item:
        first = np.argsort(-it, kind="mergesort")
        it, sc = it[first], sc[first]
    order = np.argsort(-sc, kind="mergesort")
    items[:n], scores[:n] = it[order], sc[order]


@njit(cache=True, nogil=True)
def place_records(qcode, dcode, score, row_of_query, item_of_doc, by_item, filled, unsorted, ranking_item,
                  ranking_score):
    """Place records in their ranking rows in record order, each row from place ``filled[row]`` on (advanced
    as it fills); ``unsorted[row]`` set when a record ranks above the one placed before it here. Records
    before ``filled[row]`` may be placed by another thread meanwhile, so they are not read."""
    begin = filled.copy()
    for r in range(qcode.size):
        row = row_of_query[qcode[r]]
        if row < 0:
            continue
        at, item, value = filled[row], item_of_doc[dcode[r]], score[r]
        if at > begin[row]:
            before = ranking_score[row, at - 1]
            if value > before or (by_item and value == before and item > ranking_item[row, at - 1]):
                unsorted[row] = True
        ranking_item[row, at], ranking_score[row, at] = item, value
        filled[row] = at + 1


@njit(cache=True, nogil=True)
def finish_rows(lo, hi, seam, filled, unsorted, by_item, ranking_item, ranking_score):
    """Rows ``lo:hi`` made whole: a row whose records were placed in two parts is unsorted when the first
    of the second part (at ``seam[row]``) ranks above the last of the first; the rest of each row is padded
    (item -1, score NaN) and an unsorted row sorted."""
    for row in range(lo, hi):
        at = seam[row]
        if 0 < at < filled[row]:
            before, value = ranking_score[row, at - 1], ranking_score[row, at]
            if value > before or (by_item and value == before and ranking_item[row, at] > ranking_item[row, at - 1]):
                unsorted[row] = True
        for at in range(filled[row], ranking_item.shape[1]):
            ranking_item[row, at], ranking_score[row, at] = -1, np.nan
        if unsorted[row]:
            _sort_row(ranking_item[row], ranking_score[row], filled[row], by_item)


#: records below which ``fill_rows`` stays on one thread (a thread's start costs more than their placing)
SPLIT_RECORDS = 1 << 20


def fill_rows(qcode, dcode, score, row_of_query, item_of_doc, by_item, ranking_item, ranking_score,
              split: int = SPLIT_RECORDS):
    """Place every kept record in its ranking row (``ranking_item``/``ranking_score``, uninitialised) in record
    order, pad each row's rest (item -1, score NaN), then sort the rows whose records were not listed best
    first. Written once each: filling the arrays with pads first would touch every page twice.

    From ``split`` records on, two threads (the passes release the GIL): one places the first half of the
    records, the other the second half from where the first half's records of each row end (counted
    first), then each pads and sorts half the rows. The result is the one-thread result.
    """
    n_rows = ranking_item.shape[0]
    unsorted = np.zeros(n_rows, dtype=np.bool_)
    if qcode.size < split:
        filled = np.zeros(n_rows, dtype=np.int64)
        place_records(qcode, dcode, score, row_of_query, item_of_doc, by_item, filled, unsorted,
                      ranking_item, ranking_score)
        finish_rows(0, n_rows, np.zeros_like(filled), filled, unsorted, by_item, ranking_item, ranking_score)
        return
    half = qcode.size // 2
    seam = row_counts(qcode[:half], row_of_query, n_rows)   # where each row's second-half records start
    filled_a, filled_b = np.zeros(n_rows, dtype=np.int64), seam.copy()
    unsorted_b = np.zeros(n_rows, dtype=np.bool_)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(place_records, qcode[:half], dcode[:half], score[:half], row_of_query, item_of_doc,
                            by_item, filled_a, unsorted, ranking_item, ranking_score)
        place_records(qcode[half:], dcode[half:], score[half:], row_of_query, item_of_doc, by_item, filled_b,
                      unsorted_b, ranking_item, ranking_score)
        first.result()
        unsorted |= unsorted_b
        middle = n_rows // 2
        first = pool.submit(finish_rows, 0, middle, seam, filled_b, unsorted, by_item, ranking_item, ranking_score)
        finish_rows(middle, n_rows, seam, filled_b, unsorted, by_item, ranking_item, ranking_score)
        first.result()


@njit(cache=True, nogil=True)
def may_repeat(qcode, dcode, n_queries, n_docs):
    """False when no (query, document) pair occurs twice among the records, found in one pass when each
    query's records are contiguous (as runs list them); True when a pair does, or when a query's records
    are split (then only a sort can tell)."""
    seen_query = np.zeros(n_queries, dtype=np.bool_)
    stamp = np.full(n_docs, -1, dtype=np.int64)   # the block that last listed each document
    block, last = -1, -1
    for r in range(qcode.size):
        query = qcode[r]
        if query != last:
            if seen_query[query]:
                return True
            seen_query[query] = True
            last = query
            block += 1
        doc = dcode[r]
        if stamp[doc] == block:
            return True
        stamp[doc] = block
    return False
