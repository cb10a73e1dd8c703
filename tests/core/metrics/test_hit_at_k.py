"""hit_at_k = 1 if r_1 <= k (README, Metrics): Rank-k, CMC@k, Hit@k."""
import math

import numpy as np
import pytest
from ranklists import csr, per_query, precomputed, tied_ranks

from evalcore.core.metrics import cmc_curve, first_rank, hit_at
from evalcore.core.ranking import rank_pairs


@pytest.mark.parametrize("k, want", [(1, 0.0), (2, 0.0), (3, 1.0), (5, 1.0), (100, 1.0)])
def test_hit_at_k_is_one_from_the_first_relevant_rank_on(k, want):
    assert per_query(hit_at, [[3, 6]], [2], k) == [want]


def test_hit_at_k_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(hit_at, [[]], [0], 5)[0])


def test_hit_at_k_is_zero_when_no_relevant_item_is_in_a_precomputed_list():
    ranked = precomputed([5, 3, 7], relevant=[9])
    assert hit_at(ranked.indptr, ranked.ranks, ranked.n_relevant, 3).tolist() == [0.0]


@pytest.mark.parametrize("ties, want", [("pessimistic", [1.0, 1.0]), ("optimistic", [1.0, 1.0])])
def test_hit_at_k_under_tied_scores_below_rank_one(ties, want):
    ranked = tied_ranks(ties)
    assert [hit_at(ranked.indptr, ranked.ranks, ranked.n_relevant, k).tolist()[0] for k in (1, 2)] == want


def test_hit_at_k_under_a_tie_at_rank_one_is_zero_pessimistically_and_one_optimistically():
    indptr, items = np.array([0, 2]), np.arange(2)
    scores, relevant = np.array([0.7, 0.7], np.float32), np.array([True, False])
    ranked = {t: rank_pairs(indptr, items, scores, relevant, t, np.array([1])) for t in ("pessimistic", "optimistic")}
    got = {t: hit_at(r.indptr, r.ranks, r.n_relevant, 1).tolist() for t, r in ranked.items()}
    assert got == {"pessimistic": [0.0], "optimistic": [1.0]}


def test_cmc_at_k_is_the_mean_hit_at_k_over_known_queries():
    # first ranks 1, 3, none (R = 0, unknown), 2, missing (R = 1, not in the list)
    lists, n_rel = [[1], [3, 4], [], [2], []], [1, 2, 0, 1, 1]
    indptr, ranks = csr(lists)
    first = first_rank(indptr, ranks, np.array(n_rel))
    cmc = cmc_curve(first, np.array(n_rel), 4).tolist()
    hits = [[per_query(hit_at, lists, n_rel, k)[i] for i in (0, 1, 3, 4)] for k in (1, 2, 3, 4)]
    assert cmc == pytest.approx([sum(h) / 4 for h in hits], rel=1e-15)
    assert cmc == pytest.approx([1 / 4, 2 / 4, 3 / 4, 3 / 4], rel=1e-15)
