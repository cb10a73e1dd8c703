"""ndcg_at_k = sum_{r_i <= k} 1/log2(r_i + 1) / sum_{j <= min(R, k)} 1/log2(j + 1) (README, Metrics): binary nDCG@k."""
import math

import numpy as np
import pytest
from ranklists import per_query, precomputed, tied_ranks
from references import ndcg_at as reference_ndcg_at

from evalcore.core.lists import binary_lists
from evalcore.core.metrics import ndcg_at

LOG3 = math.log2(3)


@pytest.mark.parametrize("k, want", [(1, 1.0), (2, 1 / (1 + 1 / LOG3)), (3, 1.5 / (1.5 + 1 / LOG3)),
                                     (5, 1.5 / (1.5 + 1 / LOG3)), (6, (1.5 + 1 / math.log2(7)) / (1.5 + 1 / LOG3))])
def test_ndcg_at_k_of_ranks_1_3_6(k, want):
    # gains 1/log2(2) = 1 at rank 1, 1/log2(4) = 1/2 at rank 3, 1/log2(7) at rank 6; ideal: ranks 1, 2, 3
    assert per_query(ndcg_at, [[1, 3, 6]], [3], k) == pytest.approx([want], rel=1e-15)


def test_ndcg_at_k_is_one_for_a_perfect_ranking_and_when_the_top_k_are_all_relevant():
    assert per_query(ndcg_at, [[1, 2, 3], [1, 2]], [3, 5], 2) == [1.0, 1.0]


def test_ndcg_at_k_with_one_relevant_item_is_its_discount_inside_the_cut_off():
    assert per_query(ndcg_at, [[3]], [1], 3) == [0.5]
    assert per_query(ndcg_at, [[3]], [1], 2) == [0.0]


def test_ndcg_at_k_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(ndcg_at, [[]], [0], 5)[0])


def test_ndcg_at_k_counts_relevant_items_missing_from_a_precomputed_list_in_the_ideal_ranking():
    # list 5, 3, 7 with relevant {3, 9}: item 3 at rank 2; the ideal puts both relevant items at ranks 1, 2
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    got = ndcg_at(binary_lists(ranked.indptr, ranked.ranks, ranked.n_relevant), 10).tolist()
    assert got == pytest.approx([(1 / LOG3) / (1 + 1 / LOG3)], rel=1e-15)


@pytest.mark.parametrize("ties, ranks", [("pessimistic", (1, 4, 5)), ("optimistic", (1, 2, 5))])
def test_ndcg_at_k_under_tied_scores_follows_the_tie_policy(ties, ranks):
    ranked = tied_ranks(ties)
    want = sum(1 / math.log2(r + 1) for r in ranks) / (1 + 1 / LOG3 + 0.5)
    assert ndcg_at(binary_lists(ranked.indptr, ranked.ranks, ranked.n_relevant), 5).tolist() == pytest.approx([want], rel=1e-15)


def test_ndcg_at_k_matches_the_dcg_of_a_full_ranking_over_the_ideal_one():
    rng = np.random.default_rng(12)
    for _ in range(300):
        length, k = int(rng.integers(1, 40)), int(rng.integers(1, 25))
        n = int(rng.integers(1, min(length, 8) + 1))
        ranks = sorted(rng.choice(np.arange(1, length + 1), size=n, replace=False).tolist())
        n_rel = n + int(rng.integers(0, 3))
        relevant = np.zeros(length, dtype=bool)
        relevant[np.asarray(ranks) - 1] = True
        assert per_query(ndcg_at, [ranks], [n_rel], k) == pytest.approx([reference_ndcg_at(relevant, n_rel, k)],
                                                                         rel=1e-12)
