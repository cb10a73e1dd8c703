"""precision_at_k = #{r_i <= k} / k (README, Metrics)."""
import math

import pytest
from ranklists import per_query, precomputed, tied_ranks

from evalcore.core.metrics import precision_at


@pytest.mark.parametrize("k, want", [(1, 1.0), (2, 1 / 2), (3, 2 / 3), (6, 3 / 6), (10, 3 / 10)])
def test_precision_at_k_is_the_share_of_the_top_k_that_is_relevant(k, want):
    assert per_query(precision_at, [[1, 3, 6]], [3], k) == pytest.approx([want], rel=1e-15)


def test_precision_at_k_divides_by_k_even_when_r_is_smaller():
    # one relevant item at rank 1: precision@10 is 1/10, not 1
    assert per_query(precision_at, [[1]], [1], 10) == [0.1]


def test_precision_at_k_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(precision_at, [[]], [0], 5)[0])


def test_precision_at_k_of_a_precomputed_list_counts_only_the_ranked_relevant_items():
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    assert precision_at(ranked.indptr, ranked.ranks, ranked.n_relevant, 3).tolist() == pytest.approx([1 / 3])


@pytest.mark.parametrize("ties, want", [("pessimistic", [1.0, 1 / 2, 1 / 3, 2 / 4]),
                                        ("optimistic", [1.0, 2 / 2, 2 / 3, 2 / 4])])
def test_precision_at_k_under_tied_scores_follows_the_tie_policy(ties, want):
    ranked = tied_ranks(ties)
    got = [precision_at(ranked.indptr, ranked.ranks, ranked.n_relevant, k).tolist()[0] for k in (1, 2, 3, 4)]
    assert got == pytest.approx(want, rel=1e-15)
