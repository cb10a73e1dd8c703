"""ap_trapz = (1/R) * sum_i (i/r_i + p_i)/2, p_i = (i-1)/(r_i-1), p_i = 1 when r_i = 1 (README, Metrics)."""
import math

import numpy as np
import pytest
from ranklists import per_query, precomputed, tied_ranks

from evalcore.core.metrics import average_precision_trapezoid


def reference_ap_trapz(rank_list, n_relevant):
    """Person_reID_baseline_pytorch's compute_mAP loop, with its 0-based ``rows_good``."""
    if n_relevant == 0:
        return math.nan
    ap = 0.0
    for i, row in enumerate(r - 1 for r in rank_list):
        d_recall = 1.0 / n_relevant
        precision = (i + 1) * 1.0 / (row + 1)
        old_precision = i * 1.0 / row if row != 0 else 1.0
        ap += d_recall * (old_precision + precision) / 2
    return ap


def test_ap_trapz_with_one_relevant_item_at_rank_one_is_one():
    assert per_query(average_precision_trapezoid, [[1]], [1]) == [1.0]


def test_ap_trapz_with_one_relevant_item_at_rank_four_is_an_eighth():
    # (1/4 + 0/3) / 2: the precision before the only hit is 0
    assert per_query(average_precision_trapezoid, [[4]], [1]) == [0.125]


def test_ap_trapz_of_ranks_1_3_6_is_sixty_one_ninetieths():
    # i=1: (1 + 1)/2; i=2: (2/3 + 1/2)/2 = 7/12; i=3: (3/6 + 2/5)/2 = 9/20 -> (1 + 7/12 + 9/20) / 3 = 61/90
    assert per_query(average_precision_trapezoid, [[1, 3, 6]], [3]) == pytest.approx([61 / 90], rel=1e-15)


def test_ap_trapz_of_a_query_without_relevant_items_is_undefined():
    assert math.isnan(per_query(average_precision_trapezoid, [[]], [0])[0])


def test_ap_trapz_counts_relevant_items_missing_from_a_precomputed_list_in_r():
    # relevant {3, 9}, 3 at rank 2, 9 missing: (1/2 + 0/1)/2 / 2 = 1/8
    ranked = precomputed([5, 3, 7], relevant=[3, 9])
    assert average_precision_trapezoid(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [0.125]


@pytest.mark.parametrize("ties, want", [
    ("pessimistic", (1 + (2 / 4 + 1 / 3) / 2 + (3 / 5 + 2 / 4) / 2) / 3),   # ranks 1, 4, 5
    ("optimistic", (1 + 1 + (3 / 5 + 2 / 4) / 2) / 3),                       # ranks 1, 2, 5
])
def test_ap_trapz_under_tied_scores_follows_the_tie_policy(ties, want):
    ranked = tied_ranks(ties)
    got = average_precision_trapezoid(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist()
    assert got == pytest.approx([want], rel=1e-15)


def test_ap_trapz_matches_the_baseline_loop_on_random_rank_lists():
    rng = np.random.default_rng(1)
    lists, n_rel = [], []
    for _ in range(200):
        n = int(rng.integers(1, 8))
        lists.append(sorted(rng.choice(np.arange(1, 40), size=n, replace=False).tolist()))
        n_rel.append(n)
    got = per_query(average_precision_trapezoid, lists, n_rel)
    assert got == pytest.approx([reference_ap_trapz(r, n) for r, n in zip(lists, n_rel)], rel=1e-12)
