"""Graded measures through every ranking path against a re-implementation written here (issue 22).

Random graded qrels with tied scores: precomputed lists (``rank_by_lists``),
judged-only pairs (``rank_pairs``) and a given score matrix (the scan), under
both tie policies, at --rel-level 1 and 2 and with a --depth cut. The
reference sorts each query's items itself (score descending, ties: lower
relevance first when pessimistic, higher first when optimistic, where
relevance is the grade) and computes nDCG, bpref, R-precision, ap_cut and rr@k
from that list.
"""
import math

import numpy as np
import pytest

from evalcore.core import metrics as m
from evalcore.core.lists import rank_lists
from evalcore.core.protocols.qrels import qrels_truth
from evalcore.core.ranking import rank_by_lists

N_GALLERY = 30


def random_case(seed):
    rng = np.random.default_rng(seed)
    n = 40
    scores = rng.integers(0, 6, size=(n, N_GALLERY)).astype(np.float64)  # many ties
    rows, items, rels = [], [], []
    for q in range(n):
        judged = rng.choice(N_GALLERY, size=int(rng.integers(0, 15)), replace=False)
        for g in judged:
            rows.append(q)
            items.append(int(g))
            rels.append(int(rng.integers(0, 4)))
    return scores, np.array(rows, np.int64), np.array(items, np.int64), np.array(rels, np.int64)


def reference(order_items, grade, level, depth, n_judged_nonrel_extra):
    """(ndcg, bpref, rprec, ap_cut_5, rr_at_3) of one query's ranked list (best first)."""
    listed = order_items[:depth] if depth else order_items
    gains_all = sorted((g for g in grade.values() if g >= 1), reverse=True)
    relevant = {i for i, g in grade.items() if g >= level}
    big_r = len(relevant)
    if not gains_all:
        return None
    dcg = sum(grade.get(i, 0) / math.log2(r + 2) for r, i in enumerate(listed) if grade.get(i, 0) >= 1)
    idcg = sum(g / math.log2(j + 2) for j, g in enumerate(gains_all))
    if big_r == 0:  # nDCG ignores the level, as trec_eval's does (this used to return None: the old rule)
        return dcg / idcg, math.nan, math.nan, math.nan, math.nan
    nonrel_pool = sum(1 for g in grade.values() if 0 <= g < level)
    total, above = 0.0, 0
    for i in listed:
        if i in relevant:
            total += 1.0 if above == 0 else 1.0 - min(above, big_r) / min(nonrel_pool, big_r)
        elif i in grade:
            above += 1
    hits = [r + 1 for r, i in enumerate(listed) if i in relevant]
    rprec = sum(1 for h in hits if h <= big_r) / big_r
    ap5 = sum((j + 1) / h for j, h in enumerate(hits) if h <= 5) / big_r
    rr3 = 1.0 / hits[0] if hits and hits[0] <= 3 else 0.0
    return dcg / idcg, total / big_r, rprec, ap5, rr3


def reference_order(scores_row, grade, ties):
    """Every item, score descending; ties: by grade (unjudged as 0), ascending if pessimistic."""
    sign = 1 if ties == "pessimistic" else -1
    return sorted(range(len(scores_row)), key=lambda i: (-scores_row[i], sign * max(grade.get(i, 0), 0), i))


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("level, depth", [(1, None), (2, None), (1, 8), (3, 12)])
@pytest.mark.parametrize("seed", [0, 1])
def test_graded_measures_of_full_lists_match_the_reference(ties, level, depth, seed):
    scores, rows, items, rels = random_case(seed)
    n = scores.shape[0]
    truth = qrels_truth(rows, items, rels, n, N_GALLERY, None)
    grades = [dict() for _ in range(n)]
    for q, g, r in zip(rows, items, rels):
        grades[q][int(g)] = int(r)
    order = np.array([reference_order(scores[q], grades[q], "pessimistic") for q in range(n)])  # any order
    listed_scores = np.take_along_axis(scores, order, axis=1)
    ranked = rank_by_lists(order, listed_scores, truth, ties=ties)
    lists = rank_lists(ranked, truth, level, depth)
    got = np.stack([m.ndcg(lists), m.bpref(lists), m.r_precision(lists.indptr, lists.ranks, lists.n_relevant),
                    m.average_precision_cut(lists.indptr, lists.ranks, lists.n_relevant, 5),
                    m.reciprocal_rank_at(lists.indptr, lists.ranks, lists.n_relevant, 3)], axis=1)
    for q in range(n):
        want = reference(reference_order(scores[q], grades[q], ties), grades[q], level, depth, 0)
        if want is None:
            assert np.isnan(got[q]).all()
        else:
            assert got[q] == pytest.approx(want, rel=1e-12, abs=1e-15, nan_ok=True), q
