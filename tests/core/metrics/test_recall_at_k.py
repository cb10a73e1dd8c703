"""recall_at_k = #{r_i <= k} / R (README, Metrics): Recall@K of place recognition."""
import math

import pytest
from ranklists import per_query, precomputed, tied_ranks

from evalcore.core.metrics import recall_at


@pytest.mark.parametrize("k, want", [(1, 1 / 3), (2, 1 / 3), (3, 2 / 3), (5, 2 / 3), (6, 1.0), (50, 1.0)])
def test_recall_at_k_is_the_share_of_relevant_items_in_the_top_k(k, want):
    assert per_query(recall_at, [[1, 3, 6]], [3], k) == pytest.approx([want], rel=1e-15)


def test_recall_at_k_with_one_relevant_item_is_the_hit():
    assert per_query(recall_at, [[4]], [1], 3) == [0.0]
    assert per_query(recall_at, [[4]], [1], 4) == [1.0]


def test_recall_at_k_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(recall_at, [[]], [0], 5)[0])


def test_recall_at_k_counts_relevant_items_missing_from_a_precomputed_list_in_r():
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    assert recall_at(ranked.indptr, ranked.ranks, ranked.n_relevant, 3).tolist() == [0.5]


@pytest.mark.parametrize("ties, want", [("pessimistic", [1 / 3, 1 / 3, 1 / 3, 2 / 3]),
                                        ("optimistic", [1 / 3, 2 / 3, 2 / 3, 2 / 3])])
def test_recall_at_k_under_tied_scores_follows_the_tie_policy(ties, want):
    ranked = tied_ranks(ties)
    got = [recall_at(ranked.indptr, ranked.ranks, ranked.n_relevant, k).tolist()[0] for k in (1, 2, 3, 4)]
    assert got == pytest.approx(want, rel=1e-15)
