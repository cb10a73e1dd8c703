"""inp = R / r_R, 0 if r_R is missing (README, Metrics): mINP of Ye et al."""
import math

import numpy as np
import pytest
from ranklists import binary_ranking, per_query, precomputed, tied_ranks

from evalcore.core.metrics import inverse_negative_penalty
from evalcore.core.ranking import rank_pairs


def reference_inp(rank_list, n_relevant):
    """Ye et al.'s evaluation: cmc = cumsum(matches); inp = cmc[pos_max] / (pos_max + 1)."""
    if n_relevant == 0:
        return math.nan
    if len(rank_list) < n_relevant:
        return 0.0
    matches = binary_ranking(rank_list, max(rank_list))
    pos_max = int(np.max(np.where(matches)))
    return float(np.cumsum(matches)[pos_max] / (pos_max + 1.0))


def test_inp_with_one_relevant_item_is_the_reciprocal_rank():
    assert per_query(inverse_negative_penalty, [[1], [4]], [1, 1]) == [1.0, 0.25]


def test_inp_of_ranks_1_3_6_is_a_half():
    assert per_query(inverse_negative_penalty, [[1, 3, 6]], [3]) == [0.5]


def test_inp_is_zero_when_the_last_relevant_item_is_missing_from_a_precomputed_list():
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    assert inverse_negative_penalty(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [0.0]


def test_inp_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(inverse_negative_penalty, [[]], [0])[0])


@pytest.mark.parametrize("ties, want", [("pessimistic", 3 / 5), ("optimistic", 3 / 5)])
def test_inp_under_tied_scores_depends_on_the_last_relevant_rank_only(ties, want):
    ranked = tied_ranks(ties)
    assert inverse_negative_penalty(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [want]


def test_inp_under_ties_at_the_last_relevant_item_follows_the_tie_policy():
    # the tied group holds the last relevant item: relevant 0 (0.9), 1 (0.5); negative 2 (0.5)
    indptr, items = np.array([0, 3]), np.arange(3)
    scores, relevant = np.array([0.9, 0.5, 0.5], np.float32), np.array([True, True, False])
    for ties, want in (("pessimistic", 2 / 3), ("optimistic", 1.0)):
        ranked = rank_pairs(indptr, items, scores, relevant, ties, np.array([2]))
        assert inverse_negative_penalty(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [want]


def test_inp_matches_the_reference_on_random_rank_lists():
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(1, 8))
        ranks = sorted(rng.choice(np.arange(1, 40), size=n, replace=False).tolist())
        assert per_query(inverse_negative_penalty, [ranks], [n]) == pytest.approx([reference_inp(ranks, n)], rel=1e-15)
