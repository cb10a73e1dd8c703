"""rr = 1 / r_1 (README, Metrics): MRR's per-query term."""
import math

import pytest
from ranklists import per_query, precomputed, tied_ranks

from evalcore.core.metrics import reciprocal_rank


def test_rr_is_one_over_the_first_relevant_rank():
    assert per_query(reciprocal_rank, [[1, 2], [4, 9], [10]], [2, 2, 1]) == [1.0, 0.25, 0.1]


def test_rr_ignores_relevant_items_after_the_first():
    assert per_query(reciprocal_rank, [[3]], [1]) == per_query(reciprocal_rank, [[3, 4, 50]], [3])


def test_rr_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(reciprocal_rank, [[]], [0])[0])


def test_rr_is_zero_when_no_relevant_item_is_in_a_precomputed_list():
    ranked = precomputed([5, 3, 7], relevant=[9])
    assert ranked.n_relevant.tolist() == [1] and ranked.ranks.tolist() == []
    assert reciprocal_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [0.0]


def test_rr_of_a_precomputed_list_counts_from_the_first_non_junk_item():
    ranked = precomputed([4, 5, 3], relevant=[3], junk=[4, 5])
    assert reciprocal_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [1.0]


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_rr_under_tied_scores_below_the_first_relevant_item_is_unchanged(ties):
    ranked = tied_ranks(ties)
    assert reciprocal_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [1.0]
