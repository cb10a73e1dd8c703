"""ap = (1/R) * sum_i i / r_i (README, Metrics): the mAP of re-id and TREC."""
import math

import numpy as np
import pytest
from ranklists import binary_ranking, per_query, precomputed, tied_ranks

from evalcore.core.metrics import average_precision


def reference_ap(rank_list, n_relevant):
    """The conventional AP: precision at each relevant position of a 0/1 list, summed, over R."""
    if n_relevant == 0:
        return math.nan
    if not rank_list:
        return 0.0
    rel = binary_ranking(rank_list, max(rank_list))
    precision = np.cumsum(rel) / np.arange(1, len(rel) + 1)
    return float(precision[rel].sum() / n_relevant)


def test_ap_with_one_relevant_item_is_the_reciprocal_rank():
    assert per_query(average_precision, [[1], [4], [10]], [1, 1, 1]) == [1.0, 0.25, 0.1]


def test_ap_of_ranks_1_3_6_is_thirteen_eighteenths():
    # (1/1 + 2/3 + 3/6) / 3 = 13/18
    assert per_query(average_precision, [[1, 3, 6]], [3]) == pytest.approx([13 / 18], rel=1e-15)


def test_ap_is_one_when_every_relevant_item_comes_first():
    assert per_query(average_precision, [[1, 2, 3, 4]], [4]) == [1.0]


def test_ap_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(average_precision, [[]], [0])[0])


def test_ap_of_queries_in_one_call_keeps_each_query_to_its_own_ranks():
    lists, n_rel = [[2, 5], [], [1], [3, 4, 8, 20]], [2, 0, 1, 4]
    got = per_query(average_precision, lists, n_rel)
    want = [reference_ap(r, n) for r, n in zip(lists, n_rel)]
    assert math.isnan(got[1]) and math.isnan(want[1])
    assert [got[i] for i in (0, 2, 3)] == pytest.approx([want[i] for i in (0, 2, 3)], rel=1e-15)


def test_ap_counts_relevant_items_missing_from_a_precomputed_list_in_r():
    # list 5, 3, 7 with relevant {3, 9}: item 3 at rank 2, item 9 never ranked -> (1/2) / 2
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    assert ranked.ranks.tolist() == [2] and ranked.n_relevant.tolist() == [2]
    assert average_precision(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [0.25]


def test_ap_of_a_precomputed_list_skips_junk_items():
    # list 5, 4, 3 with 4 junk: 3 moves up to rank 2; relevant {3}: ap = 1/2
    ranked = precomputed([5, 4, 3], relevant=[3], junk=[4])
    assert average_precision(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [0.5]


@pytest.mark.parametrize("ties, want", [("pessimistic", (1 + 2 / 4 + 3 / 5) / 3), ("optimistic", (1 + 1 + 3 / 5) / 3)])
def test_ap_under_tied_scores_follows_the_tie_policy(ties, want):
    ranked = tied_ranks(ties)
    got = average_precision(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist()
    assert got == pytest.approx([want], rel=1e-15)


def test_ap_matches_the_conventional_definition_on_random_rank_lists():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n_rel = int(rng.integers(1, 8))
        ranks = sorted(rng.choice(np.arange(1, 40), size=n_rel, replace=False).tolist())
        assert per_query(average_precision, [ranks], [n_rel]) == pytest.approx([reference_ap(ranks, n_rel)], rel=1e-12)
