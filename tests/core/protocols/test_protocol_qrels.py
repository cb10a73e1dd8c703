"""``qrels`` (README Protocols): relevant = rel 1, junk = rel -1, unjudged = not relevant."""
import numpy as np
import pytest
from truthlists import junk_lists, relevant_lists

from evalcore.core.protocols.qrels import collapse_qrels, qrels_problems, qrels_truth
from evalcore.core.ranking import rank_by_lists

N_GALLERY = 6
GALLERY_JUNK = np.array([False, False, False, False, False, True])
# (query, item, rel): query 0 judges 1 and 2 relevant, 3 not relevant, 4 junk; query 1 judges 0 and 5 relevant
QRELS = np.array([[0, 1, 1], [0, 3, 0], [0, 4, -1], [0, 2, 1], [1, 0, 1], [1, 5, 1]])


def truth(judged_only=False, gallery_junk=GALLERY_JUNK):
    q, i, r = QRELS.T
    q, i, r, problems = collapse_qrels(q, i, r, np.arange(len(q)))
    assert problems == []
    return qrels_truth(q, i, r, 2, N_GALLERY, gallery_junk, judged_only)


def test_qrels_relevant_items_are_the_rel_1_judgements():
    assert relevant_lists(truth(gallery_junk=None)) == [[1, 2], [0, 5]]


def test_qrels_rel_minus_1_is_junk_and_rel_0_is_neither():
    t = truth(gallery_junk=None)
    assert junk_lists(t) == [[4], []] and t.n_junk.tolist() == [1, 0]


def test_qrels_gallery_junk_overrides_a_relevant_judgement():
    t = truth()
    assert relevant_lists(t) == [[1, 2], [0]] and t.n_junk.tolist() == [2, 1]


def test_qrels_unjudged_items_are_ranked_as_not_relevant():
    # list 0 (unjudged), 3 (rel 0), 1 (rel 1), 5 (gallery/junk), 2 (rel 1): relevant at ranks 3 and 4
    ranked = rank_by_lists(np.array([[0, 3, 1, 5, 2], [4, 0, -1, -1, -1]]), None, truth(), GALLERY_JUNK)
    assert ranked.ranks.tolist() == [3, 4, 2]


def test_qrels_repeated_identical_judgements_are_one():
    q, i, r, problems = collapse_qrels(np.array([0, 0, 0]), np.array([2, 2, 3]), np.array([1, 1, 0]), np.arange(3))
    assert (q.tolist(), i.tolist(), r.tolist(), problems) == ([0, 0], [2, 3], [1, 0], [])


def test_qrels_conflicting_repeats_are_a_problem_naming_both_rows():
    *_, problems = collapse_qrels(np.array([0, 1, 0]), np.array([2, 0, 2]), np.array([1, 0, -1]), np.arange(3))
    assert len(problems) == 1 and str(problems[0]).startswith("qrels/rel:") and "rows 0 and 2" in str(problems[0])


@pytest.mark.parametrize("query, item, rel, needle", [
    # rel -2 is now valid (in the pool, not judged: contract v4), so -3 is the first grade below the range
    (2, 0, 1, "qrels/query"), (0, 6, 1, "qrels/item"), (0, -1, 1, "qrels/item"), (0, 0, 128, "qrels/rel"), (0, 0, -3, "qrels/rel"),
])
def test_qrels_out_of_range_judgements_are_problems_naming_the_array(query, item, rel, needle):
    problems = qrels_problems(np.array([0, query]), np.array([1, item]), np.array([1, rel]), np.arange(2), 2, 6)
    assert len(problems) == 1 and str(problems[0]).startswith(needle) and "rows 1" in str(problems[0])
    assert problems[0].array == needle and problems[0].rows == [1]
