"""The compiled loops over precomputed top-K lists (``ranking/item``): one pass a row.

numpy needs a global sort of every (row, item) pair for each membership test
(relevant, junk, judged) and a lexsort of every listed entry for the tie
policy: at 100,000 queries x top-100 that was ~1.4 s a 50,000-query chunk.
Here each row is walked once; membership is one probe of a small hash table
of the row's judged and junk items (a binary search in the row's sorted CSR
list for judged-only runs' allowed items) and tie groups are ordered in place.
At 1,024 queries x top-1,000 with grades that is 11 ms a chunk, from 44 ms
with three binary searches an entry and a gain sort called for every tie
group. Numbers are identical to the sort-based formulation
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


#: flags of a row's table slot (``rank_rows``)
JUNK = 1
NONREL = 2
POOL = 4
#: 2**64 / golden ratio (Fibonacci hashing: the product's top bits spread any run of item numbers)
HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def home_slot(key, shift):
    """Where linear probing for ``key`` starts: the top bits of key * HASH_MUL."""
    return np.int64((np.uint64(key) * HASH_MUL) >> shift)


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def probe(slot_key, slot_row, shift, mask, r, key):
    """The slot holding ``key`` in row ``r``'s table, or the free slot where linear probing stops. Slots
    whose ``slot_row`` is not ``r`` are free: a new row needs no clearing."""
    h = home_slot(key, shift)
    while slot_row[h] == r and slot_key[h] != key:
        h = (h + 1) & mask
    return h


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def table_slot(slot_key, slot_row, slot_pair, slot_flag, shift, mask, r, key):
    """The slot of ``key`` in row ``r``'s table, claimed and cleared if new."""
    h = probe(slot_key, slot_row, shift, mask, r, key)
    if slot_row[h] == r:
        return h
    slot_row[h] = r
    slot_key[h] = key
    slot_pair[h] = -1
    slot_flag[h] = 0
    return h


@njit(cache=True, nogil=True, boundscheck=False)
def rank_rows(items, scores, has_scores, pessimistic, junk_indptr, junk_items, gallery_junk, has_gallery_junk,
              allowed_indptr, allowed_items, has_allowed, rel_indptr, rel_items, gains, has_gains,
              nonrel_indptr, nonrel_items, has_nonrel, out_start, counts, ranks, pairs, before, first_pos,
              first_rel_pos, kept, nonrel_start, nonrel_counts, nonrel_ranks, tie_start, tie_size,
              pool_indptr, pool_items, has_pool, pool_before):
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
    order (-1 when there is none). ``kept[r]``: the row's kept entries (its retrieved items). With
    ``has_nonrel``, the places of its judged non-relevant entries, ascending, from
    ``nonrel_ranks[nonrel_start[r]]`` on, ``nonrel_counts[r]`` of them. ``tie_start[out_start[r] + c]`` /
    ``tie_size[...]``: the first place and the size of the c-th relevant entry's tie group (itself alone
    without scores). With ``has_pool``: ``pool_before[out_start[r] + c]``, the entries in the pool but not judged
    (``pool``: qrels -2) placed before it (infAP's).
    """
    n, k = items.shape
    kpos = np.empty(k, dtype=np.int64)
    kpair = np.empty(k, dtype=np.int64)
    knon = np.empty(k, dtype=np.bool_)
    order = np.empty(k, dtype=np.int64)
    rel_tmp = np.empty(k, dtype=np.int64)
    group_first = np.empty(k, dtype=np.int64)   # per kept entry: the first place (0-based) of its tie group
    group_size = np.empty(k, dtype=np.int64)
    # the row's judged and junk items in a small open-addressing table, so a listed item that is none of
    # them (most are) is found out in one probe instead of three binary searches
    most = 0
    for r in range(n):
        most = max(most, (rel_indptr[r + 1] - rel_indptr[r]) + (junk_indptr[r + 1] - junk_indptr[r])
                   + ((nonrel_indptr[r + 1] - nonrel_indptr[r]) if has_nonrel else 0)
                   + ((pool_indptr[r + 1] - pool_indptr[r]) if has_pool else 0))
    bits = 4
    while (1 << bits) < 2 * most:
        bits += 1
    size = 1 << bits
    mask = size - 1
    shift = np.uint64(64 - bits)
    slot_key = np.empty(size, dtype=np.int64)
    slot_row = np.full(size, -1, dtype=np.int64)   # a slot holds a key of this row only when it says so
    slot_pair = np.empty(size, dtype=np.int64)
    slot_flag = np.empty(size, dtype=np.uint8)     # JUNK | NONREL | POOL
    kpool = np.zeros(k if has_pool else 0, dtype=np.bool_)
    for r in range(n):
        for p in range(rel_indptr[r], rel_indptr[r + 1]):
            s = table_slot(slot_key, slot_row, slot_pair, slot_flag, shift, mask, r, rel_items[p])
            slot_pair[s] = p
        if has_nonrel:
            for p in range(nonrel_indptr[r], nonrel_indptr[r + 1]):
                s = table_slot(slot_key, slot_row, slot_pair, slot_flag, shift, mask, r, nonrel_items[p])
                slot_flag[s] |= NONREL
        if has_pool:
            for p in range(pool_indptr[r], pool_indptr[r + 1]):
                s = table_slot(slot_key, slot_row, slot_pair, slot_flag, shift, mask, r, pool_items[p])
                slot_flag[s] |= POOL
        for p in range(junk_indptr[r], junk_indptr[r + 1]):
            s = table_slot(slot_key, slot_row, slot_pair, slot_flag, shift, mask, r, junk_items[p])
            slot_flag[s] |= JUNK
        m = 0
        for j in range(k):
            it = items[r, j]
            if it < 0:
                continue
            if has_gallery_junk and gallery_junk[it]:
                continue
            if has_allowed and find_in_row(allowed_items, allowed_indptr[r], allowed_indptr[r + 1], it) < 0:
                continue
            h = probe(slot_key, slot_row, shift, mask, r, it)
            if slot_row[h] == r:
                if slot_flag[h] & JUNK:
                    continue
                kpair[m] = slot_pair[h]
                knon[m] = (slot_flag[h] & NONREL) != 0
                if has_pool:
                    kpool[m] = (slot_flag[h] & POOL) != 0
            else:
                kpair[m] = -1
                knon[m] = False
                if has_pool:
                    kpool[m] = False
            kpos[m] = j
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
                        group_first[e] = placed   # read for relevant entries only
                        group_size[e] = b - a
                        rel_tmp[n_rel] = e
                        n_rel += 1
                if has_gains and n_rel > 1:  # a call per group costs more than the rest of the row walk
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
        seen_pool = 0
        base = out_start[r]
        nonrel_base = nonrel_start[r] if has_nonrel else 0
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
                if has_pool:
                    pool_before[base + c] = seen_pool
                if has_scores:
                    tie_start[base + c] = group_first[e] + 1
                    tie_size[base + c] = group_size[e]
                else:   # the given order stands: no ties
                    tie_start[base + c] = p + 1
                    tie_size[base + c] = 1
                c += 1
            elif knon[e]:
                if has_nonrel:
                    nonrel_ranks[nonrel_base + seen_nonrel] = p + 1
                seen_nonrel += 1
            elif has_pool and kpool[e]:
                seen_pool += 1
        counts[r] = c
        kept[r] = m
        if has_nonrel:
            nonrel_counts[r] = seen_nonrel


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


# =========================================================================== graded walks down one ranking
# trec_eval's G, ndcg_rel and Rndcg (README, Metrics): each is a running sum down a query's ranked items of
# grade >= 1 (``gain_ranks`` ascending, ``gains``) beside the ideal ranking (``ideal_gains``, highest first),
# added place by place in rank order as trec_eval adds them, so the rounding is the same whatever the chunk.


@njit(cache=True, nogil=True, boundscheck=False)
def normalized_gain_rows(gain_indptr, gain_ranks, gains, ideal_indptr, ideal_gains, out):
    """out[q] = sum_j g_j / log2(2 + cost(r_j) - CG(r_j)) / sum of the ideal gains; NaN without an ideal.

    cost(r) = sum_{p <= r} max(ideal_p, 1) (ideal_p = 0 past the ideal list); CG(r) = the gains ranked at or
    above r. Every term is a sum of integers, exact in a double.
    """
    for q in range(len(ideal_indptr) - 1):
        a, b = ideal_indptr[q], ideal_indptr[q + 1]
        if b == a:
            out[q] = np.nan
            continue
        ideal_total = 0.0
        for p in range(a, b):
            ideal_total += ideal_gains[p]
        cost = 0.0
        counted = 0   # places added to cost
        found = 0.0
        total = 0.0
        for j in range(gain_indptr[q], gain_indptr[q + 1]):
            r = gain_ranks[j]
            while counted < r and counted < b - a:
                cost += max(float(ideal_gains[a + counted]), 1.0)
                counted += 1
            if counted < r:
                cost += r - counted
                counted = r
            found += gains[j]
            total += gains[j] / np.log2(2.0 + cost - found)
        out[q] = total / ideal_total


@njit(cache=True, nogil=True, boundscheck=False)
def ndcg_at_relevant_rows(gain_indptr, gain_ranks, gains, ideal_indptr, ideal_gains, out):
    """out[q] = (1/R') [sum_j DCG(r_j) / IDCG(r_j) + (R' - m) DCG / IDCG]; NaN when R' = 0.

    R': the ideal list's length; m: the ranked items of grade >= 1; DCG(r), IDCG(r): the sums down to rank r
    (the ideal's stops at R'); DCG, IDCG: the whole sums.
    """
    for q in range(len(ideal_indptr) - 1):
        a, b = ideal_indptr[q], ideal_indptr[q + 1]
        n_ideal = b - a
        if n_ideal == 0:
            out[q] = np.nan
            continue
        dcg = 0.0
        idcg = 0.0
        counted = 0
        total = 0.0
        m = 0
        for j in range(gain_indptr[q], gain_indptr[q + 1]):
            r = gain_ranks[j]
            while counted < r and counted < n_ideal:
                idcg += ideal_gains[a + counted] / np.log2(counted + 2.0)
                counted += 1
            dcg += gains[j] / np.log2(r + 1.0)
            total += dcg / idcg
            m += 1
        while counted < n_ideal:
            idcg += ideal_gains[a + counted] / np.log2(counted + 2.0)
            counted += 1
        total += float(n_ideal - m) * dcg / idcg
        out[q] = total / n_ideal


@njit(cache=True, nogil=True, boundscheck=False)
def ndcg_at_r_levels_rows(gain_indptr, gain_ranks, gains, ideal_indptr, ideal_gains, n_relevant, n_retrieved,
                          out):
    """out[q] = the mean of DCG(c) / IDCG(c) over the cut-offs c: each place where the ideal gain drops
    (c = #{ideal gains >= g} for each grade g present) and n when n >= R' + 2; NaN when R = 0."""
    for q in range(len(ideal_indptr) - 1):
        a, b = ideal_indptr[q], ideal_indptr[q + 1]
        n_ideal = b - a
        if n_relevant[q] == 0 or n_ideal == 0:
            out[q] = np.nan
            continue
        j = gain_indptr[q]
        end = gain_indptr[q + 1]
        dcg = 0.0
        idcg = 0.0
        total = 0.0
        points = 0
        for c in range(1, n_ideal + 1):
            idcg += ideal_gains[a + c - 1] / np.log2(c + 1.0)
            if c < n_ideal and ideal_gains[a + c] == ideal_gains[a + c - 1]:
                continue
            while j < end and gain_ranks[j] <= c:
                dcg += gains[j] / np.log2(gain_ranks[j] + 1.0)
                j += 1
            total += dcg / idcg
            points += 1
        if n_retrieved[q] >= n_ideal + 2:
            while j < end and gain_ranks[j] <= n_retrieved[q]:
                dcg += gains[j] / np.log2(gain_ranks[j] + 1.0)
                j += 1
            total += dcg / idcg
            points += 1
        out[q] = total / points
