"""ap_at_K = (1/min(R, K)) * sum_{r_i <= K} i / r_i (README, Metrics): mAP@K of landmark retrieval (GLDv2)."""
import math

import numpy as np
import pytest
from ranklists import binary_ranking, per_query, precomputed, tied_ranks

from evalcore.core.metrics import average_precision, average_precision_at


def reference_ap_at(rank_list, n_relevant, k):
    """The GLDv2 (Kaggle) form: sum over the top K of precision@j * rel(j), over min(R, K)."""
    if n_relevant == 0:
        return math.nan
    rel = binary_ranking([r for r in rank_list if r <= k], k)
    precision = np.cumsum(rel) / np.arange(1, k + 1)
    return float((precision * rel).sum() / min(n_relevant, k))


@pytest.mark.parametrize("k, want", [(1, 1.0), (2, 1 / 2), (3, (1 + 2 / 3) / 3), (5, (1 + 2 / 3) / 3),
                                     (6, (1 + 2 / 3 + 3 / 6) / 3)])
def test_ap_at_k_of_ranks_1_3_6(k, want):
    # min(R, K) = K below K = 3: ap@1 = 1, ap@2 = (1/1) / 2
    assert per_query(average_precision_at, [[1, 3, 6]], [3], k) == pytest.approx([want], rel=1e-15)


def test_ap_at_k_with_one_relevant_item_is_the_reciprocal_rank_inside_the_cut_off_and_zero_outside():
    assert per_query(average_precision_at, [[4]], [1], 4) == [0.25]
    assert per_query(average_precision_at, [[4]], [1], 3) == [0.0]


def test_ap_at_k_equals_ap_when_every_relevant_item_is_inside_the_cut_off():
    lists, n_rel = [[2, 5, 7], [1, 9]], [3, 2]
    assert per_query(average_precision_at, lists, n_rel, 10) == per_query(average_precision, lists, n_rel)


def test_ap_at_k_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(average_precision_at, [[]], [0], 5)[0])


def test_ap_at_k_divides_by_r_including_relevant_items_missing_from_a_precomputed_list():
    # relevant {3, 9}: 3 at rank 2, 9 missing; ap@3 = (1/2) / min(2, 3)
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    assert average_precision_at(ranked.indptr, ranked.ranks, ranked.n_relevant, 3).tolist() == [0.25]


@pytest.mark.parametrize("ties, want", [("pessimistic", (1 + 2 / 4) / 3), ("optimistic", (1 + 1) / 3)])
def test_ap_at_k_under_tied_scores_follows_the_tie_policy(ties, want):
    ranked = tied_ranks(ties)
    got = average_precision_at(ranked.indptr, ranked.ranks, ranked.n_relevant, 4).tolist()
    assert got == pytest.approx([want], rel=1e-15)


def test_ap_at_k_matches_the_gldv2_form_on_random_rank_lists():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 8))
        k = int(rng.integers(1, 20))
        ranks = sorted(rng.choice(np.arange(1, 30), size=n, replace=False).tolist())
        assert per_query(average_precision_at, [ranks], [n], k) == pytest.approx([reference_ap_at(ranks, n, k)],
                                                                                 rel=1e-12, abs=1e-15)
