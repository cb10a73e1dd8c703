"""rprec = #{r_i <= R} / R (README, Metrics): R-precision, trec_eval's Rprec.

The worked example of adding a metric (README, Adding a metric): this file, its
function in core/metrics.py, its registration in core/registry.py and its
brute-force reference in references.py.
"""
import math

import numpy as np
import pytest
from ranklists import per_query, precomputed, tied_ranks

from evalcore.core.metrics import precision_at, r_precision, recall_at


def test_rprec_of_ranks_1_3_6_is_two_thirds():
    # R = 3: the top 3 hold ranks 1 and 3
    assert per_query(r_precision, [[1, 3, 6]], [3]) == pytest.approx([2 / 3], rel=1e-15)


def test_rprec_is_one_exactly_when_the_r_relevant_items_come_first():
    assert per_query(r_precision, [[1, 2, 3], [1, 2, 4], [1]], [3, 3, 1]) == pytest.approx([1.0, 2 / 3, 1.0])


def test_rprec_with_one_relevant_item_is_the_hit_at_one():
    assert per_query(r_precision, [[1], [2], [9]], [1, 1, 1]) == [1.0, 0.0, 0.0]


def test_rprec_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(r_precision, [[]], [0])[0])


def test_rprec_counts_relevant_items_missing_from_a_precomputed_list_in_r():
    # list 3, 5, 7 with relevant {3, 9}: R = 2, the top 2 hold item 3 only
    ranked = precomputed([3, 5, 7], relevant=[3, 9])
    assert r_precision(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [0.5]


@pytest.mark.parametrize("ties, want", [("pessimistic", 1 / 3), ("optimistic", 2 / 3)])
def test_rprec_under_tied_scores_follows_the_tie_policy(ties, want):
    # relevant ranks 1, 4, 5 (pessimistic) or 1, 2, 5 (optimistic); R = 3
    ranked = tied_ranks(ties)
    assert r_precision(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == pytest.approx([want], rel=1e-15)


def test_rprec_is_precision_and_recall_at_r():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n_rel = int(rng.integers(1, 8))
        ranks = sorted(rng.choice(np.arange(1, 30), size=int(rng.integers(0, n_rel + 1)), replace=False).tolist())
        got = per_query(r_precision, [ranks], [n_rel])
        assert got == per_query(precision_at, [ranks], [n_rel], n_rel) == per_query(recall_at, [ranks], [n_rel], n_rel)
