"""The compiled loops over precomputed top-K lists (``ranking/item``): one pass a row.

numpy needs a global sort of every (row, item) pair for each membership test
(relevant, junk, judged) and a lexsort of every listed entry for the tie
policy: at 100,000 queries x top-100 that was ~1.4 s a 50,000-query chunk.
Here each row is walked once; membership is a binary search in the row's
sorted CSR list (``Truth`` lists are ascending within a row) and tie groups
are ordered in place. Numbers are identical to the sort-based formulation
(``tests/core/test_list_kernels.py`` keeps it as the reference).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def find_in_row(values, lo, hi, x):
    """The index of ``x`` in the ascending ``values[lo:hi]``, or -1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        v = values[mid]
        if v < x:
            lo = mid + 1
        elif v > x:
            hi = mid
        else:
            return mid
    return -1


@njit(cache=True, nogil=True, boundscheck=False)
def _sort_by_gain(entries, count, gain, pair, descending):
    """Sort ``entries[:count]`` (kept-entry indices, in list order) by their gain, stably."""
    if count < 2:
        return
    if count <= 64:  # insertion sort: tie groups are small in practice
        for a in range(1, count):
            e = entries[a]
            g = gain[pair[e]]
            b = a - 1
            while b >= 0:
                h = gain[pair[entries[b]]]
                if (h < g) if descending else (h > g):
                    entries[b + 1] = entries[b]
                    b -= 1
                else:
                    break
            entries[b + 1] = e
        return
    keys = np.empty(count, dtype=np.int64)
    for a in range(count):
        g = gain[pair[entries[a]]]
        keys[a] = -g if descending else g
    order = np.argsort(keys, kind="mergesort")
    copy = entries[:count].copy()
    for a in range(count):
        entries[a] = copy[order[a]]


@njit(cache=True, nogil=True, boundscheck=False)
def rank_rows(items, scores, has_scores, pessimistic, junk_indptr, junk_items, gallery_junk, has_gallery_junk,
              allowed_indptr, allowed_items, has_allowed, rel_indptr, rel_items, gains, has_gains,
              nonrel_indptr, nonrel_items, has_nonrel, out_start, counts, ranks, pairs, before, first_pos,
              first_rel_pos):
    """Ranks of every row's listed relevant items, in ranking order.

    An entry is kept when its item is >= 0, not junk for the row, not in
    ``gallery_junk`` and (``has_allowed``) allowed for the row. Kept entries are
    ranked in list order, except that with ``has_scores`` each run of equal
    consecutive kept scores is one tie group, ordered by the policy:
    pessimistic puts its non-relevant entries first, then the relevant ones by
    gain ascending; optimistic the relevant ones first by gain descending;
    list order breaks every remaining tie. For the row's c-th relevant entry
    in that order, at 1-based place p among the kept entries, writes
    ``ranks[out_start[r] + c] = p``, ``pairs[...]`` its index in ``rel_items``
    and ``before[...]`` the judged non-relevant entries (``nonrel``) placed
    before it. ``counts[r]`` = c's; ``first_pos[r]`` / ``first_rel_pos[r]``
    = list position of the first kept / first relevant entry in ranking
    order (-1 when there is none).
    """
    n, k = items.shape
    kpos = np.empty(k, dtype=np.int64)
    kpair = np.empty(k, dtype=np.int64)
    knon = np.empty(k, dtype=np.bool_)
    order = np.empty(k, dtype=np.int64)
    rel_tmp = np.empty(k, dtype=np.int64)
    for r in range(n):
        m = 0
        for j in range(k):
            it = items[r, j]
            if it < 0:
                continue
            if find_in_row(junk_items, junk_indptr[r], junk_indptr[r + 1], it) >= 0:
                continue
            if has_gallery_junk and gallery_junk[it]:
                continue
            if has_allowed and find_in_row(allowed_items, allowed_indptr[r], allowed_indptr[r + 1], it) < 0:
                continue
            kpos[m] = j
            kpair[m] = find_in_row(rel_items, rel_indptr[r], rel_indptr[r + 1], it)
            knon[m] = has_nonrel and find_in_row(nonrel_items, nonrel_indptr[r], nonrel_indptr[r + 1], it) >= 0
            m += 1
        # the ranking order of the kept entries
        if has_scores:
            placed = 0
            a = 0
            while a < m:
                s = scores[r, kpos[a]]
                b = a + 1
                while b < m and scores[r, kpos[b]] == s:
                    b += 1
                n_rel = 0
                for e in range(a, b):
                    if kpair[e] >= 0:
                        rel_tmp[n_rel] = e
                        n_rel += 1
                if has_gains:
                    _sort_by_gain(rel_tmp, n_rel, gains, kpair, not pessimistic)
                if not pessimistic:
                    for c in range(n_rel):
                        order[placed] = rel_tmp[c]
                        placed += 1
                for e in range(a, b):
                    if kpair[e] < 0:
                        order[placed] = e
                        placed += 1
                if pessimistic:
                    for c in range(n_rel):
                        order[placed] = rel_tmp[c]
                        placed += 1
                a = b
        else:
            for e in range(m):
                order[e] = e
        c = 0
        seen_nonrel = 0
        base = out_start[r]
        first_pos[r] = kpos[order[0]] if m > 0 else -1
        first_rel_pos[r] = -1
        for p in range(m):
            e = order[p]
            if kpair[e] >= 0:
                if c == 0:
                    first_rel_pos[r] = kpos[e]
                ranks[base + c] = p + 1
                pairs[base + c] = kpair[e]
                before[base + c] = seen_nonrel
                c += 1
            elif knon[e]:
                seen_nonrel += 1
        counts[r] = c


@njit(cache=True, nogil=True, boundscheck=False)
def list_row_problems(items, scores, has_scores, stamp, use_stamp, dup, nan, rises):
    """Per row: an item listed twice (``dup``), a NaN score on a listed item (``nan``), a listed item's
    score above the lowest score listed before it (``rises``). Pads (item < 0) are skipped.

    ``use_stamp``: ``stamp`` has a slot for every item (last row that listed it, + 1); else each row's
    items are sorted to find repeats.
    """
    n, k = items.shape
    buf = np.empty(k, dtype=items.dtype)
    for r in range(n):
        if use_stamp:
            for j in range(k):
                it = items[r, j]
                if it >= 0:
                    if stamp[it] == r + 1:
                        dup[r] = True
                    stamp[it] = r + 1
        else:
            m = 0
            for j in range(k):
                if items[r, j] >= 0:
                    buf[m] = items[r, j]
                    m += 1
            s = np.sort(buf[:m])
            for j in range(1, m):
                if s[j] == s[j - 1]:
                    dup[r] = True
                    break
        if has_scores:
            low = np.inf
            for j in range(k):
                if items[r, j] >= 0:
                    v = scores[r, j]
                    if np.isnan(v):
                        nan[r] = True
                    elif v > low:
                        rises[r] = True
                    if v < low:
                        low = v
