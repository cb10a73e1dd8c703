"""``qrels --judged-only`` (README Protocols): unjudged items are junk too; a query is ranked among its
judged non-junk items alone."""
import numpy as np
from truthlists import allowed_lists, relevant_lists

from evalcore.core.protocols.qrels import qrels_truth
from evalcore.core.ranking import rank_by_lists, rank_pairs

N_GALLERY = 6
GALLERY_JUNK = np.array([False, False, False, False, False, True])
QRELS = np.array([[0, 1, 1], [0, 2, 1], [0, 3, 0], [0, 4, -1], [1, 0, 1], [1, 5, 1]])  # sorted by (query, item)


def truth(gallery_junk=GALLERY_JUNK):
    q, i, r = QRELS.T
    return qrels_truth(q, i, r, 2, N_GALLERY, gallery_junk, judged_only=True)


def test_judged_only_allows_the_judged_items_with_rel_0_or_1_only():
    assert allowed_lists(truth(gallery_junk=None)) == [[1, 2, 3], [0, 5]]


def test_judged_only_drops_gallery_junk_from_the_allowed_items():
    assert allowed_lists(truth()) == [[1, 2, 3], [0]]


def test_judged_only_counts_every_other_gallery_item_as_junk():
    assert truth().n_junk.tolist() == [N_GALLERY - 3, N_GALLERY - 1]


def test_judged_only_keeps_the_same_relevant_items():
    assert relevant_lists(truth()) == [[1, 2], [0]]


def test_judged_only_ranks_a_precomputed_list_among_the_allowed_items():
    # list 0 (unjudged: junk), 3 (rel 0), 1 (rel 1), 5 (gallery/junk), 2 (rel 1): relevant at ranks 2 and 3
    ranked = rank_by_lists(np.array([[0, 3, 1, 5, 2], [4, 0, -1, -1, -1]]), None, truth(), GALLERY_JUNK)
    assert ranked.ranks.tolist() == [2, 3, 1]


def test_judged_only_pair_ranking_orders_by_score_then_tie_policy_then_index():
    # query 0's allowed items 1, 2, 3 scored 0.5, 0.5, 0.5: all tied
    indptr, items = np.array([0, 3]), np.array([1, 2, 3])
    scores, relevant = np.full(3, 0.5, np.float32), np.array([True, True, False])
    pess = rank_pairs(indptr, items, scores, relevant, "pessimistic", np.array([2]))
    opt = rank_pairs(indptr, items, scores, relevant, "optimistic", np.array([2]))
    assert (pess.ranks.tolist(), pess.top1.tolist()) == ([2, 3], [3])
    assert (opt.ranks.tolist(), opt.top1.tolist()) == ([1, 2], [1])
