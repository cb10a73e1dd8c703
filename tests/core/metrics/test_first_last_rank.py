"""first_rank = r_1, last_rank = r_R, null unless every relevant item is ranked (README, Metrics).

evalcore's arrays mark null as -1 (the report writes it as null).
"""
from ranklists import per_query, precomputed, tied_ranks

from evalcore.core.metrics import first_rank, last_rank


def test_first_and_last_rank_are_the_best_and_worst_relevant_ranks():
    assert per_query(first_rank, [[3, 5, 9], [1]], [3, 1]) == [3, 1]
    assert per_query(last_rank, [[3, 5, 9], [1]], [3, 1]) == [9, 1]


def test_last_rank_is_null_unless_every_relevant_item_is_ranked():
    assert per_query(last_rank, [[3, 5]], [3]) == [-1]
    assert per_query(first_rank, [[3, 5]], [3]) == [3]


def test_first_and_last_rank_of_a_query_without_relevant_items_are_null():
    assert per_query(first_rank, [[]], [0]) == [-1]
    assert per_query(last_rank, [[]], [0]) == [-1]


def test_first_rank_is_null_when_no_relevant_item_is_in_a_precomputed_list():
    ranked = precomputed([5, 3, 7], relevant=[9])
    assert first_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [-1]
    assert last_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [-1]


def test_first_and_last_rank_of_a_precomputed_list_with_junk_and_padding():
    # list 8, 2 (junk), 6, -1 (pad), ... relevant {6, 8}: ranks 1, 2
    ranked = precomputed([8, 2, 6, -1, -1], relevant=[6, 8], junk=[2])
    assert first_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [1]
    assert last_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist() == [2]


def test_first_and_last_rank_under_tied_scores():
    for ties, want in (("pessimistic", (1, 5)), ("optimistic", (1, 5))):
        ranked = tied_ranks(ties)
        got = (first_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist()[0],
               last_rank(ranked.indptr, ranked.ranks, ranked.n_relevant).tolist()[0])
        assert got == want
