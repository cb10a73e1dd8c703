"""The compiled pass over precomputed lists against a per-row Python reference.

``rank_by_lists`` walks each row once in numba; the reference below states the
rule directly (sort every kept entry by tie group, policy side, gain, list
position) on random lists with ties, pads, junk, gallery junk, judged-only
allowed lists, grades and judged non-relevant items, under both policies.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from evalcore.core.protocols import Truth, csr_from_pairs
from evalcore.core.ranking import list_problems, rank_by_lists
from evalcore.errors import InputError


def reference(items, scores, truth, gallery_junk, ties):
    """Per row: (ranks, pair indices, judged-before counts, top1, top1 score, first relevant score)."""
    out = []
    for r, row in enumerate(items):
        rel = {int(g): p for p, g in enumerate(truth.rel_items) if truth.rel_indptr[r] <= p < truth.rel_indptr[r + 1]}
        junk = set(truth.junk_items[truth.junk_indptr[r]:truth.junk_indptr[r + 1]].tolist())
        allowed = (None if truth.allowed_indptr is None
                   else set(truth.allowed_items[truth.allowed_indptr[r]:truth.allowed_indptr[r + 1]].tolist()))
        nonrel = (set() if truth.nonrel_indptr is None
                  else set(truth.nonrel_items[truth.nonrel_indptr[r]:truth.nonrel_indptr[r + 1]].tolist()))
        kept = [j for j, g in enumerate(row) if g >= 0 and g not in junk
                and not (gallery_junk is not None and gallery_junk[g]) and (allowed is None or g in allowed)]
        group, keyed = 0, []
        for n, j in enumerate(kept):
            if scores is not None and n and scores[r][j] != scores[r][kept[n - 1]]:
                group += 1
            g = int(row[j])
            is_rel = g in rel
            gain = int(truth.gains[rel[g]]) if is_rel else 0
            if scores is None:
                key = (n,)
            elif ties == "pessimistic":
                key = (group, is_rel, gain, j)
            else:
                key = (group, not is_rel, -gain, j)
            keyed.append((key, j, g))
        keyed.sort()
        ranks, pairs, before, seen = [], [], [], 0
        for place, (_, _j, g) in enumerate(keyed, start=1):
            if g in rel:
                ranks.append(place)
                pairs.append(rel[g])
                before.append(seen)
            elif g in nonrel:
                seen += 1
        top1 = keyed[0][2] if keyed else -1
        top1_score = float(scores[r][keyed[0][1]]) if keyed and scores is not None else math.nan
        first_rel = [j for _, j, g in keyed if g in rel]
        rel_score = float(scores[r][first_rel[0]]) if first_rel and scores is not None else math.nan
        out.append((ranks, pairs, before, top1, top1_score, rel_score))
    return out


def random_case(rng, n=40, k=12, g=30, graded=True, judged=True, allowed=False):
    items = np.array([rng.permutation(g)[:k] for _ in range(n)])
    items[rng.random(items.shape) < 0.1] = -1                      # pads anywhere
    scores = -np.sort(-rng.integers(0, 5, size=(n, k)), axis=1).astype(np.float32)  # few values: many ties
    rows = np.repeat(np.arange(n), 8)
    judged_items = np.array([rng.permutation(g)[:8] for _ in range(n)]).ravel()
    grade = rng.integers(-1, 4 if graded else 2, size=rows.size)
    rel, junk, non = grade >= 1, grade == -1, grade == 0
    rel_indptr, order = np.zeros(n + 1, dtype=np.int64), np.lexsort((judged_items[rel], rows[rel]))
    np.cumsum(np.bincount(rows[rel], minlength=n), out=rel_indptr[1:])
    junk_indptr, junk_items = csr_from_pairs(rows[junk], judged_items[junk], n)
    truth = Truth(rel_indptr, judged_items[rel][order], junk_indptr, junk_items, np.diff(junk_indptr),
                  rel_gain=grade[rel][order] if graded else None)
    if judged:
        nonrel_indptr, nonrel_items = csr_from_pairs(rows[non], judged_items[non], n)
        truth = Truth(**{**truth.__dict__, "nonrel_indptr": nonrel_indptr, "nonrel_items": nonrel_items,
                         "n_judged_nonrel": np.diff(nonrel_indptr)})
    if allowed:
        ok = grade >= 0
        allowed_indptr, allowed_items = csr_from_pairs(rows[ok], judged_items[ok], n)
        truth = Truth(**{**truth.__dict__, "allowed_indptr": allowed_indptr, "allowed_items": allowed_items})
    gallery_junk = rng.random(g) < 0.1
    return items, scores, truth, gallery_junk


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", range(6))
def test_rank_by_lists_equals_the_per_row_rule(seed, ties):
    rng = np.random.default_rng(seed)
    items, scores, truth, gallery_junk = random_case(rng, graded=seed % 2 == 0, judged=seed % 3 != 0,
                                                     allowed=seed == 4)
    for given, junk in ((scores, gallery_junk), (None, None), (scores.astype(np.float64), None)):
        ranked = rank_by_lists(items, given, truth, junk, ties=ties)
        want = reference(items, given, truth, junk, ties)
        for r, (ranks, pairs, before, top1, top1_score, rel_score) in enumerate(want):
            a, b = ranked.indptr[r], ranked.indptr[r + 1]
            assert ranked.ranks[a:b].tolist() == ranks
            assert ranked.pairs[a:b].tolist() == pairs
            if truth.nonrel_indptr is not None:
                assert ranked.judged_before[a:b].tolist() == before
            else:
                assert ranked.judged_before is None
            assert ranked.top1[r] == top1
            assert np.array_equal([ranked.top1_score[r], ranked.relevant_score[r]], [top1_score, rel_score],
                                  equal_nan=True)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_rows_of_very_different_judged_counts_and_junk_that_is_also_relevant(ties):
    """The per-row tables (sized by the busiest row, probed linearly): one row judges 600 items, others one or
    none; junk items that are also judged relevant are junk (left out), as the rule says."""
    rng = np.random.default_rng(11)
    n, k, g = 12, 400, 5000
    items = np.array([rng.permutation(g)[:k] for _ in range(n)])
    scores = -np.sort(-rng.integers(0, 40, size=(n, k)), axis=1).astype(np.float64)
    sizes = [600, 1, 0, 37, 2, 600, 5, 0, 1, 90, 3, 250]
    rel_rows, rel_items, junk_rows, junk_items, non_rows, non_items = [], [], [], [], [], []
    for r, size in enumerate(sizes):
        listed = rng.permutation(items[r])[: size // 2]          # half of the judged items are listed
        other = rng.permutation(np.setdiff1d(np.arange(g), items[r]))[: size - len(listed)]
        judged = np.concatenate([listed, other]).astype(np.int64)
        kind = rng.integers(0, 3, size=len(judged))               # 0 relevant, 1 judged non-relevant, 2 junk
        rel_rows += [r] * int((kind == 0).sum())
        rel_items += judged[kind == 0].tolist()
        non_rows += [r] * int((kind == 1).sum())
        non_items += judged[kind == 1].tolist()
        also_junk = judged[kind == 0][:3]                         # relevant and junk at once: junk wins
        junk_rows += [r] * (int((kind == 2).sum()) + len(also_junk))
        junk_items += judged[kind == 2].tolist() + also_junk.tolist()
    rel_indptr, rel_sorted = csr_from_pairs(np.array(rel_rows), np.array(rel_items), n)
    junk_indptr, junk_sorted = csr_from_pairs(np.array(junk_rows), np.array(junk_items), n)
    non_indptr, non_sorted = csr_from_pairs(np.array(non_rows), np.array(non_items), n)
    truth = Truth(rel_indptr, rel_sorted, junk_indptr, junk_sorted, np.diff(junk_indptr),
                  rel_gain=rng.integers(1, 4, size=len(rel_sorted)), nonrel_indptr=non_indptr,
                  nonrel_items=non_sorted, n_judged_nonrel=np.diff(non_indptr))
    ranked = rank_by_lists(items, scores, truth, None, ties=ties)
    for r, (ranks, pairs, before, top1, *_rest) in enumerate(reference(items, scores, truth, None, ties)):
        a, b = ranked.indptr[r], ranked.indptr[r + 1]
        assert ranked.ranks[a:b].tolist() == ranks, r
        assert ranked.pairs[a:b].tolist() == pairs, r
        assert ranked.judged_before[a:b].tolist() == before, r
        assert ranked.top1[r] == top1, r
    assert sum(len(x) for x in (ranked.ranks,)) > 100  # the busy rows did rank many relevant items


def test_big_tie_groups_sort_by_gain_past_the_insertion_sort():
    """A row of 300 equally scored items, 200 of them relevant with grades: the mergesort branch."""
    rng = np.random.default_rng(7)
    items = rng.permutation(300)[None, :]
    scores = np.zeros((1, 300))
    rel = np.sort(rng.permutation(300)[:200])
    truth = Truth(np.array([0, 200]), rel, np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64),
                  np.zeros(1, dtype=np.int64), rel_gain=rng.integers(1, 5, size=200))
    for ties in ("pessimistic", "optimistic"):
        ranked = rank_by_lists(items, scores, truth, ties=ties)
        (ranks, pairs, *_), = reference(items, scores, truth, None, ties)
        assert ranked.ranks.tolist() == ranks and ranked.pairs.tolist() == pairs


def problems_reference(items, scores):
    dup = [r for r, row in enumerate(items) if len(set(row[row >= 0].tolist())) < int((row >= 0).sum())]
    nan = [r for r, row in enumerate(items) if scores is not None and np.isnan(scores[r][row >= 0]).any()]
    rises = []
    for r, row in enumerate(items):
        listed = [float(scores[r][j]) for j in range(len(row)) if row[j] >= 0] if scores is not None else []
        if any(listed[j] > min(listed[:j]) for j in range(1, len(listed))):
            rises.append(r)
    return dup, nan, rises


@pytest.mark.parametrize("big_items", [False, True])
def test_list_problems_names_the_rows_the_rule_finds(big_items):
    rng = np.random.default_rng(3)
    items = np.array([rng.permutation(50)[:10] for _ in range(30)])
    items[[2, 9], 4] = items[[2, 9], 1]                     # repeats
    items[5, 3] = -1
    if big_items:                                           # far beyond any stamp table: the per-row sort
        items = np.where(items >= 0, items + (1 << 40), items)
    scores = -np.sort(-rng.random((30, 10)), axis=1)
    scores[7, 6] = scores[7, 2] + 1                         # a rise
    scores[5, 3] = scores[5, 0] + 5                         # a rise on a pad: ignored
    dup, nan, rises = problems_reference(items, scores)
    found = [str(p) for p in list_problems(items, scores, q0=100)]
    assert [f"rows {', '.join(str(r + 100) for r in dup)} name" in found[0]] == [True]
    assert f"rows {', '.join(str(r + 100) for r in rises)} rise" in found[1] and rises == [7]
    assert "item" in found[0] and "positions 1, 4" in found[0]
    scores[11, 4] = np.nan
    found = [str(p) for p in list_problems(items, scores.astype(np.float32))]
    assert len(found) == 2 and "rows 11 hold NaN" in found[1]
    assert list_problems(items[[0, 1, 3]], scores[[0, 1, 3]]) == []


def test_rank_by_lists_refuses_an_item_beyond_the_gallery():
    truth = Truth(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(2, dtype=np.int64),
                  np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
    with pytest.raises(InputError, match=r"ranking/item: rows 0 hold gallery indices outside \[0, 3\)"):
        rank_by_lists(np.array([[0, 5]]), None, truth, np.zeros(3, dtype=bool))
